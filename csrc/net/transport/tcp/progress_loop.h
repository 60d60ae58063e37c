// The TCP transport's progress loop: one thread (epoll) that reads every link and feeds its
// frames to the receiving side, writes what a link's socket takes once it is writable again,
// sends acknowledgements and heartbeats, takes links up (a connection the link manager handed
// over) and down (an error, a corrupt stream, silence for the link timeout), replaying a failed
// link's unacknowledged chunks on the peer's other links, and fails a peer left without links
// for the peer timeout or whose process is gone. One thread because a peer's chunks arrive on
// links of every interface and its receive state belongs to that thread without a lock
// (docs/network.md).
// Its state is its own: the epoll set every link's socket is in (writers arm a link's
// writability in it, flushLink), the eventfd that wakes the thread (stop, handovers), the
// handovers waiting (under their own mutex), the thread and the timeouts. A link's sending side
// is changed under Peer::sendMutex; its read side (reader, lastHeard) is this thread's.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/transport/tcp/chunk_sender.h"
#include "net/transport/tcp/link_manager.h"
#include "net/transport/tcp/message_receiver.h"
#include "net/transport/tcp/peer.h"
#include "net/transport/tcp/socket.h"

namespace xccl::net::tcp {

class ProgressLoop {
 public:
  // What the progress loop asks of the transport it serves.
  class Owner {
   public:
    virtual ~Owner() = default;
    // Completes those of `requests` not done yet and wakes the waiters (takes mutex_).
    virtual void complete(const std::vector<RequestPtr>& requests) = 0;
    // `peer` is gone (no link for the peer timeout, or its process exited): it fails
    // (TransportBase::failPeer).
    virtual void losePeer(int peer, const Error& error) = 0;
    // The loop stopped for good on `error`: everything fails (TransportBase::failAll).
    virtual void progressStopped(const Error& error) = 0;
    // A link closed after the peer said goodbye: once none is left, the peer is gone.
    virtual void closedAfterBye(int peer, int index) = 0;
  };
  // Makes the epoll set and the wake eventfd (closed by the destructor). The thread stops once
  // `stopping` is set and wake() is called.
  ProgressLoop(Peers& peers, std::chrono::milliseconds linkTimeout,
               std::chrono::milliseconds peerTimeout, const std::atomic<bool>& stopping,
               MessageReceiver& receiver, ChunkSender& sender, Owner& owner);
  ~ProgressLoop();
  ProgressLoop(const ProgressLoop&) = delete;
  ProgressLoop& operator=(const ProgressLoop&) = delete;

  int epollFd() const { return epollFd_; }
  // Starts the thread, pinned to `cpus` (none: unpinned; never throws for that).
  void start(const std::vector<int>& cpus);
  bool running() const { return thread_.joinable(); }
  void wake();
  void join() {
    if (thread_.joinable()) thread_.join();
  }

  // A connection for the thread to take into use (any thread; wakes it).
  void handOver(Handover handover);
  // Takes link `index` to `peer` into use with `socket` (replacing the one up, if any): chunks
  // that waited for a link go on it. The progress thread, or the creating one before it starts.
  void linkUp(int peer, int index, Socket socket, bool recovered);
  // Takes link `index` to `peer` down: its unacknowledged chunks go on the peer's other links,
  // and the chunk it was reading is abandoned. Logged at warn level unless `quiet`.
  // The progress thread.
  void linkDown(int peer, int index, const std::string& why, bool quiet = false);
  // The peer failed: every link of `p` is closed and nothing is queued on it. sendMutex held.
  void closeLinksLocked(Peer& p);
  // Test hook: stop reading and writing link `index` to `peer` until it is taken down.
  void blackholeLink(int peer, int index);

 private:
  void progressLoop();
  // Reads what is there now, up to a bound (true: stopped at the bound, more may be there).
  bool readLink(int peer, Link& link);
  void takeBrokenDown(int peer, Link& link);
  void tick(Clock::time_point now);
  void takeHandovers();
  void sendAcks();

  const int size_;
  Peers& peers_;
  const std::chrono::milliseconds linkTimeout_;
  const std::chrono::milliseconds peerTimeout_;  // the longest a peer may stay without any link
  const std::atomic<bool>& stopping_;
  MessageReceiver& receiver_;
  ChunkSender& sender_;
  Owner& owner_;
  int epollFd_ = -1;
  int wakeFd_ = -1;  // eventfd: stop, handovers or test hooks
  std::thread thread_;
  std::mutex handoverMutex_;
  std::vector<Handover> handovers_;
};

}  // namespace xccl::net::tcp
