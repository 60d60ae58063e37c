// TCP transport: a full mesh of connections built through the store at creation, one progress
// thread (epoll) that reads frames straight into posted receive buffers (or buffers unexpected
// ones), and sends that start on the caller's thread and finish on the progress thread.
#pragma once

#include <list>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "net/store.h"
#include "net/tcp/connection.h"
#include "net/tcp/socket.h"
#include "net/transport.h"

namespace xccl::net::tcp {

struct TcpOptions {
  // Where to listen: `listenAddress` when set (a caller that needs the choice itself, e.g. to
  // pin the progress thread near that NIC, makes it once), else chooseListenAddress(storeHost).
  std::optional<Address> listenAddress;
  std::string storeHost;  // hint for choosing the interface; may be empty
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // bound for building the mesh
  std::string storePrefix = "tcp";  // keys written under this prefix (unique per group)
  // CPUs for the progress thread, normally those near the NIC or GPU the rank uses
  // (topo::progressCpusFor); empty: the thread is not pinned. XCCL_PIN_PROGRESS=0 ignores it.
  std::vector<int> progressCpus;
};

class TcpTransport final : public Transport, private FrameSink {
 public:
  TcpTransport(Store& store, int rank, int size, const TcpOptions& options);
  ~TcpTransport() override;
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "tcp"; }
  RequestPtr isend(int peer, MessageTag tag, const void* data, size_t bytes,
                   Completion onDone) override;
  RequestPtr irecv(int peer, MessageTag tag, void* data, size_t bytes, Completion onDone) override;
  void wait(const std::vector<RequestPtr>& requests, Deadline deadline,
            const std::string& what) override;
  void abort(const std::string& reason) override;
  void setStatusProvider(std::function<std::string()> provider) override;
  std::vector<std::string> queryStatus(Deadline deadline) override;
  bool peerFailed(int peer, std::string* why) override;

 private:
  struct Posted {
    RequestPtr request;
    uint8_t* data;
  };
  // A frame that arrived before its receive was posted.
  struct Unexpected {
    int peer;
    MessageTag tag;
    std::vector<uint8_t> data;
    bool complete = false;
    RequestPtr waiter;  // a receive that matched while the payload was still arriving
    uint8_t* waiterData = nullptr;
  };
  using UnexpectedPtr = std::shared_ptr<Unexpected>;
  // The frame a connection is reading right now (progress thread only).
  struct Inflight {
    RequestPtr request;
    UnexpectedPtr unexpected;
    std::vector<uint8_t> control;  // payload of an abort or status frame
  };

  void buildMesh(Store& store, const TcpOptions& options);
  void progressLoop();
  void watchWritable(int peer, bool on);
  FrameTarget onHeader(int peer, const FrameHeader& header) override;
  void onPayload(int peer, const FrameHeader& header, const FrameTarget& target) override;
  void deliverUnexpected(const UnexpectedPtr& entry, const RequestPtr& request, uint8_t* data);
  // Marks `peer` failed and fails what can no longer complete. Progress thread or abort().
  void failPeer(int peer, const Error& error, bool failAllCollectives);
  // Fails every pending request (progress thread stopped or broken).
  void failAll(const Error& error);
  // Sends a payload-only control frame (status query or reply); failures are ignored, since
  // control traffic is best effort.
  void sendControl(int peer, FrameType type, uint64_t seq, const std::string& payload);
  void failEverythingLocked(const Error& error);
  // Fails posted receives and unexpected-frame waiters accepted by `shouldFail`; mutex_ held.
  template <typename Pred>
  void failReceivesLocked(const Error& error, Pred shouldFail);
  void completeAll(const std::vector<RequestPtr>& requests);
  // The error a new request to `peer` in `space` fails with at once, or null; mutex_ held.
  const Error* refusalLocked(int peer, TagSpace space) const;

  const int rank_;
  const int size_;
  std::vector<std::unique_ptr<Connection>> connections_;  // index = peer; null for self
  int epollFd_ = -1;
  int wakeFd_ = -1;  // eventfd that stops the progress thread
  std::thread progressThread_;
  std::vector<Inflight> inflight_;  // index = peer

  // Guards matching state, peer health and request completion; waiters sleep on completed_.
  std::mutex mutex_;
  std::condition_variable completed_;
  std::list<Posted> posted_;
  std::list<UnexpectedPtr> unexpected_;
  std::vector<std::unique_ptr<Error>> peerError_;  // index = peer; set once the peer failed
  std::unique_ptr<Error> collectiveError_;         // set once a peer aborted the communicator
  std::unique_ptr<Error> abortError_;              // set once abort() ran
  std::function<std::string()> statusProvider_;    // guarded by mutex_; called outside it
  std::vector<std::string> statusReplies_;         // index = peer; guarded by mutex_
  uint64_t statusRound_ = 0;                       // replies count only for the latest query
};

}  // namespace xccl::net::tcp
