// One transport for the group made of two: shared memory (shm_rings/transport.h) to the ranks on
// this host and the network engine (tcp or ofi) to the others, chosen per peer by
// net/transport/factory.h. Algorithms see one Transport; each request is the underlying transport's
// own, and waits, abort, status queries and failure checks span both.
//
// Point-to-point messages (TagSpace::kPointToPoint) all take the network engine when it reaches
// every peer and the routes are mixed: a receive from any source must be posted on exactly one
// transport, and the messages it may match must all come through that one (the interface has
// no cancel). Collectives, monitored barriers and one-sided writes take the per-peer route.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/transport/transport.h"

namespace xccl::net {

class RoutedTransport final : public Transport {
 public:
  // `network` reaches every peer (may be null when every peer is on this host); `host` reaches
  // the peers with onHost[peer] (may be null: no shared memory). Both number ranks as the group.
  RoutedTransport(std::unique_ptr<Transport> network, std::unique_ptr<Transport> host,
                  std::vector<bool> onHost);
  ~RoutedTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // "shm+tcp", "shm+ofi", or one engine's name when only one carries traffic.
  const char* name() const override { return name_.c_str(); }
  RequestPtr isend(int peer, MessageTag tag, const void* data, size_t bytes,
                   Completion onDone) override;
  RequestPtr irecv(int peer, MessageTag tag, void* data, size_t bytes, Completion onDone) override;
  void wait(const std::vector<RequestPtr>& requests, Deadline deadline,
            const std::string& what) override;
  void abort(const std::string& reason) override;
  void setStatusProvider(std::function<std::string()> provider) override;
  std::vector<std::string> queryStatus(Deadline deadline) override;
  bool peerFailed(int peer, std::string* why) override;
  // Registers with both transports: remote().key is the network engine's, remote().hostKey the
  // shared-memory transport's. A transport without one-sided support leaves its key 0; writes
  // to the peers it carries then fail with its own error.
  std::unique_ptr<Registration> registerMemory(void* data, size_t bytes) override;
  RequestPtr iwrite(int peer, const void* data, size_t bytes, const RemoteRegion& dst,
                    uint64_t dstOffset, uint64_t signal, Completion onDone) override;
  RequestPtr iwaitWrite(int peer, uint64_t signal, Completion onDone) override;

  // Which transport carries messages in `space` to `peer`, and how many isend/iwrite calls
  // each one took (for tests and logs).
  Transport& routeOf(int peer, TagSpace space = TagSpace::kCollective) const;
  uint64_t sentOverHost() const { return sentOverHost_.load(); }
  uint64_t sentOverNetwork() const { return sentOverNetwork_.load(); }

 private:
  class Pair;
  // Wraps a completion so that waits here wake when either transport completes a request.
  Completion notifying(Completion onDone);
  Transport& count(Transport& route);

  std::unique_ptr<Transport> network_;
  std::unique_ptr<Transport> host_;
  const std::vector<bool> onHost_;
  bool p2pOverNetwork_ = false;
  int rank_ = 0;
  int size_ = 0;
  std::string name_;
  std::atomic<uint64_t> sentOverHost_{0};
  std::atomic<uint64_t> sentOverNetwork_{0};

  // Taken by completions (under a transport's own lock) only to pair with the waiters' check;
  // never held while calling into a transport.
  std::mutex mutex_;
  std::condition_variable completed_;
};

}  // namespace xccl::net
