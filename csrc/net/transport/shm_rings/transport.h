// Shared-memory transport between ranks of one host: per ordered pair a byte ring (ring.h)
// carrying frames with the full MessageTag (link.h); one progress thread per rank that
// copies arriving frames straight into posted receive buffers (unexpected ones are buffered)
// and sleeps on a futex when there is nothing to do. One-sided writes travel as frames too:
// validated against the target's registrations, copied there, then acknowledged.
//
// A transport may cover only some ranks of its group (`members`, the ranks on this host): the
// others are not its peers (net/transport/routed_transport.h sends to them over the network).
#pragma once

#include <list>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "net/rendezvous/store.h"
#include "net/transport/one_sided.h"
#include "net/transport/peer_health.h"
#include "net/transport/receive_queues.h"
#include "net/transport/shm_rings/link.h"
#include "net/transport/shm_rings/mailboxes.h"
#include "net/transport/status_board.h"
#include "net/transport/transport_base.h"

namespace xccl::net::shm_rings {

struct TransportOptions {
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // bound for creating the file
  std::string storePrefix = "shm-p2p";  // keys written under this prefix (unique per group)
  std::vector<int> progressCpus;        // for the progress thread; empty: unpinned
};

class ShmTransport final : public TransportBase, private FrameSink {
 public:
  // Collective over the store among `members` (ascending group ranks, this rank among them).
  // Returns nullptr with *why, on every member alike, when the shared file cannot be made.
  static std::unique_ptr<ShmTransport> create(Store& store, int rank, int size,
                                              const std::vector<int>& members,
                                              const TransportOptions& options, std::string* why);
  ~ShmTransport() override;
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  const char* name() const override { return "shm"; }
  // Whether `peer` is on this host (a peer of this transport).
  bool reaches(int peer) const;
  RequestPtr isend(int peer, MessageTag tag, const void* data, size_t bytes,
                   Completion onDone) override;
  RequestPtr irecv(int peer, MessageTag tag, void* data, size_t bytes, Completion onDone) override;
  void abort(const std::string& reason) override;
  // Peers of other hosts answer "" (not asked).
  std::vector<std::string> queryStatus(Deadline deadline) override;
  std::unique_ptr<Registration> registerMemory(void* data, size_t bytes) override;
  RequestPtr iwrite(int peer, const void* data, size_t bytes, const RemoteRegion& dst,
                    uint64_t dstOffset, uint64_t signal, Completion onDone) override;

 private:
  class ShmRegistration;
  // The frame being read from one peer (progress thread only).
  struct Inflight {
    RequestPtr request;
    UnexpectedPtr unexpected;
    std::string control;  // a control message's text or a write's refusal
    bool refused = false;  // a write that does not fit its registration
  };

  ShmTransport(int rank, int size, const std::vector<int>& members,
               std::unique_ptr<Mailboxes> boxes);
  void progressLoop();
  // One pass over every peer; true when anything moved.
  bool pump(std::vector<RequestPtr>* completed);
  void checkPeers();
  FrameTarget onHeader(int peer, const FrameHeader& header) override;
  void onPayload(int peer, const FrameHeader& header, const FrameTarget& target) override;
  FrameTarget matchDataLocked(int peer, const MessageTag& tag, uint64_t bytes, Inflight& slot);
  void onWriteDone(int peer, const FrameHeader& header, Inflight& slot);
  std::vector<RequestPtr> dropPeer(int peer) override;
  void failPeerLocked(const PeerLoss& loss, const Error& error) override;
  void failRequestsLocked(const Error& error) override;
  // From a catch block of the progress thread: fails every waiter with `what` and the caught
  // exception's text. Never throws.
  void failEverything(const std::string& what) noexcept;
  void sendFrame(int peer, const FrameHeader& header, const void* payload, RequestPtr request);
  void sendControl(int peer, ControlKind kind, uint64_t round, const std::string& text) override;
  // A frame whose payload is `text` (a control message, a write's answer), sent asynchronously.
  void sendText(int peer, FrameHeader header, const std::string& text);
  Link& link(int peer) const { return *links_[peer]; }

  // Only ranks of this host (reaches()), with this transport's words for the others.
  void checkPeer(int peer, bool sending) const override;

  std::vector<int> localOf_;  // by group rank: index in the mailboxes, -1 off this host
  std::unique_ptr<Mailboxes> boxes_;
  std::vector<std::unique_ptr<Link>> links_;  // by group rank; null off host / self
  std::vector<int> pidfds_;  // by group rank; -1 where liveness cannot be watched
  std::vector<Inflight> inflight_;
  std::atomic<bool> stop_{false};
  std::thread progressThread_;

  // Guarded by mutex_ (TransportBase), as the one-sided state below.
  ReceiveQueues receives_;
  // One-sided: registrations by key, writes awaiting their ack by id, signals by (peer, signal).
  RegionTable regions_;
  std::map<uint64_t, RequestPtr> writes_;
  uint64_t nextWriteId_ = 1;
  // By peer: the key of the registration a write from it is being copied into right now (0:
  // none). Set and cleared by the progress thread under mutex_; deregistration waits until no
  // peer lands in its memory, since the copy out of the ring runs without the lock.
  std::vector<uint64_t> landing_;
};

}  // namespace xccl::net::shm_rings
