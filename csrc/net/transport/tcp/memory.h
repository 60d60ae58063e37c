// One-sided writes emulated over TCP (Transport::registerMemory / iwrite / iwaitWrite). A write is
// a message of kWrite chunks on the peer's links, streamed, acknowledged and replayed like a
// send's (wire.h); the target reads each chunk straight into the registered memory, then answers
// with a kWriteAck message, and the writer's request completes on that answer.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "net/transport/one_sided.h"
#include "net/transport/peer_health.h"
#include "net/transport/tcp/chunk_sender.h"
#include "net/transport/tcp/peer.h"
#include "net/transport/tcp/receive_state.h"
#include "net/transport/transport.h"

namespace xccl::net::tcp {

// Writer's side of one write, by (peer, message id), until it both has its answer and its chunks
// are done with (acknowledged, or copied for small ones): the caller may reuse its buffer only
// then, and the answer may come before the acknowledgement that covers the chunks.
struct PendingWrite {
  RequestPtr request;
  bool chunksDone = false;
  bool answered = false;
  std::string refusal;  // the target's, when it refused the write
};

// The TCP transport's one-sided writes, both sides: the target's (registrations, chunks read in
// place into registered memory, the signal, the answer) and the writer's (the write request,
// completed by the answer once its chunks are done with). Its state is its own, guarded by the
// transport's mutex_ (TransportBase), which every member takes or is called with (names ending
// in Locked). Where a peer's sendMutex is held too (iwrite), mutex_ came first: the transport's
// lock order, never the other way.
// The target's side runs on the progress thread (the receiving side calls it, message by
// message); registerMemory, iwrite and deregistering on callers' threads.
class OneSidedWrites {
 public:
  // What the writes ask of the transport they serve.
  class Owner {
   public:
    virtual ~Owner() = default;
    // Completes those of `requests` not done yet and wakes the waiters (takes mutex_).
    virtual void complete(const std::vector<RequestPtr>& requests) = 0;
  };
  // `mutex` and `completed` are the transport's (TransportBase); so are `health` (iwrite's
  // refusal) and `signals` (the target's arrived signals).
  OneSidedWrites(int rank, int size, Peers& peers, std::mutex& mutex,
                 std::condition_variable& completed, const PeerHealth& health,
                 WriteSignals& signals, ChunkSender& sender, Owner& owner)
      : rank_(rank),
        size_(size),
        peers_(peers),
        mutex_(mutex),
        completed_(completed),
        health_(health),
        signals_(signals),
        sender_(sender),
        owner_(owner) {}
  OneSidedWrites(const OneSidedWrites&) = delete;
  OneSidedWrites& operator=(const OneSidedWrites&) = delete;

  // Transport::registerMemory and iwrite.
  std::unique_ptr<Registration> registerMemory(void* data, size_t bytes);
  RequestPtr iwrite(int peer, const void* data, size_t bytes, const RemoteRegion& dst,
                    uint64_t dstOffset, uint64_t signal, Completion onDone);

  // Target, progress thread: the first chunk of write `message` is known (its refusal, if any).
  void admitWrite(int peer, Incoming& message);
  // Where a chunk of `message` is read in place on the link of `slot`; pins the registration
  // until unpin(slot).
  uint8_t* pinChunk(ReceiveState::Slot& slot, Incoming& message, const FrameHeader& header);
  void landStashed(Incoming& message, const Stashed& chunk);
  // The chunk being read on the link of `slot` is in place, or abandoned.
  void unpin(ReceiveState::Slot& slot);
  // Every chunk of write `message` was read: its signal, then the answer to the writer.
  void writeLanded(int peer, const Incoming& message);
  // Writer, progress thread: the target's answer to write `answer.tag.seq`.
  void writeAnswered(int peer, const Incoming& answer);
  // Fails the writes to `peer` (every peer when -1). mutex_ held.
  void failWritesLocked(int peer, const Error& error);
  // The progress thread stopped (abort) or is leaving (failAll): it reads into no registered
  // memory any more, so deregistrations need not wait. mutex_ held.
  void forgetLandingLocked() { landing_.clear(); }

 private:
  friend class TcpRegistration;
  void deregister(uint64_t key);
  void chunksDoneLocked(int peer, uint64_t id, const Request& chunks);
  void finishWriteLocked(int peer, uint64_t id);

  const int rank_;
  const int size_;
  Peers& peers_;
  std::mutex& mutex_;
  std::condition_variable& completed_;
  const PeerHealth& health_;
  WriteSignals& signals_;
  ChunkSender& sender_;
  Owner& owner_;
  // Guarded by mutex_: registrations by key; how many chunks are being read into each right now
  // (a deregistration waits for none); writes awaiting their answer by (peer, message id).
  RegionTable regions_;
  std::map<uint64_t, int> landing_;
  std::map<std::pair<int, uint64_t>, PendingWrite> writes_;
};

// Deregisters under the transport's mutex, and waits until no chunk is being read into the range
// (at most one chunk per link; a link that stalls mid-chunk is taken down, and the chunk
// abandoned, within XCCL_NET_LINK_TIMEOUT_MS): a write arriving afterwards is refused by key,
// never written.
class TcpRegistration final : public Registration {
 public:
  TcpRegistration(OneSidedWrites& owner, RemoteRegion remote) : owner_(owner), remote_(remote) {}
  ~TcpRegistration() override;
  RemoteRegion remote() const override { return remote_; }

 private:
  OneSidedWrites& owner_;
  const RemoteRegion remote_;
};

}  // namespace xccl::net::tcp
