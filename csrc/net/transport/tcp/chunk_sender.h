// The TCP transport's sending side: a message cut into chunks on its peer's links (each chunk
// retained until the peer acknowledges it, so that a failed link's chunks are replayed), the
// sockets written as far as they take now, and the sends in flight when the peer fails. Its
// state is each Peer's sending side (peer.h), guarded by that Peer's sendMutex, which every
// member here runs under; it holds only the epoll set a link waiting to be writable is armed in.
// Called from any thread (the caller's, the progress thread); mutex_ (TransportBase) may be held
// too, taken first, never taken here.
#pragma once

#include <cstddef>
#include <vector>

#include "net/transport/tcp/peer.h"
#include "net/transport/tcp/wire.h"
#include "net/transport/transport.h"

namespace xccl::net::tcp {

class ChunkSender {
 public:
  explicit ChunkSender(int epollFd) : epollFd_(epollFd) {}
  ChunkSender(const ChunkSender&) = delete;
  ChunkSender& operator=(const ChunkSender&) = delete;

  // Queues `bytes` of `data` as message p.nextMessage: chunks on `p`'s links, each retained for
  // a replay. `header` holds what every chunk of the message carries (type, tag or write
  // fields). Small messages are copied and `request` completes once they are written; large
  // ones complete once acknowledged (`request` may be null: nobody waits). With `flush`, writes
  // as much as the sockets take now (the cheap path).
  void enqueueLocked(Peer& p, const RequestPtr& request, FrameHeader header, const void* data,
                     size_t bytes, std::vector<RequestPtr>* completed, bool flush = true);
  // Writes what `peer`'s sockets take now; drops the chunks the peer acknowledged and completes
  // the sends that are done.
  void flushPeer(Peer& peer, std::vector<RequestPtr>* completed);
  // The peer acknowledged every chunk below `ack`: the window moved (more may be written), and
  // acknowledged sends complete.
  void acknowledgedLocked(Peer& p, uint64_t ack, std::vector<RequestPtr>* completed);
  // The peer failed: its retained chunks go, and the sends in flight to it are returned (failed
  // by the caller).
  std::vector<RequestPtr> takeSendsLocked(Peer& p);
  // Fails the sends in flight to `peer` with `error` (mutex_ held as well).
  void failSendsLocked(Peer& peer, const Error& error);

 private:
  const int epollFd_;  // the progress loop's
};

}  // namespace xccl::net::tcp
