// Receive matching for the transports that copy arriving bytes themselves (tcp, shm): receives
// posted before their message, and messages that arrived (whole, or still arriving) before
// their receive. A message matches the oldest posted receive from its peer (or any source)
// with its tag; a receive matches the oldest such message. A collective message meeting a
// receive for another collective fails the receive instead (collectivesDiffer).
//
// Not locked itself: every `Locked` method needs the owning transport's mutex held (the one
// whose condition variable the waiters sleep on), like the transport's own `Locked` methods.
#pragma once

#include <condition_variable>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "net/transport/peer_health.h"
#include "net/transport/transport.h"

namespace xccl::net {

struct PostedReceive {
  RequestPtr request;
  uint8_t* data;
};

// A message that arrived (or started to) before its receive was posted.
struct UnexpectedMessage {
  int peer;
  MessageTag tag;
  std::vector<uint8_t> data;  // the whole message's bytes
  bool complete = false;
  RequestPtr waiter;  // a receive that matched while the payload was still arriving
  uint8_t* waiterData = nullptr;
};
using UnexpectedPtr = std::shared_ptr<UnexpectedMessage>;

class ReceiveQueues {
 public:
  // Transport::irecv once its arguments are checked: under `mutex` (not held on entry), the
  // oldest matching message that came first, else `health`'s refusal, else the receive is
  // posted; a whole message is copied into `data` outside `mutex`. `health` and `completed`
  // belong to `mutex` as this object does.
  void receive(const RequestPtr& request, uint8_t* data, const PeerHealth& health,
               std::mutex& mutex, std::condition_variable& completed);

  enum class Match {
    kNone,     // no posted receive for it: keep it with addUnexpectedLocked
    kFailed,   // the receive it met failed (other collective, other size); discard the bytes
    kMatched,  // *matched is the receive it goes to, taken out
  };
  // A message of `bytes` from `peer` with `tag` starts to arrive.
  Match matchPostedLocked(int peer, const MessageTag& tag, uint64_t bytes, PostedReceive* matched);
  // Throws (kPeerFailure, naming the sizes and `limitName`) before allocating anything when
  // the messages of `peer` kept here would hold more than `limit` bytes with this one: a peer
  // announces a message's size in its first chunk, and a corrupt or hostile one must not make
  // this rank allocate what it likes.
  UnexpectedPtr addUnexpectedLocked(int peer, const MessageTag& tag, uint64_t bytes,
                                    uint64_t limit = UINT64_MAX, const char* limitName = "");
  // Bytes of `peer`'s messages kept here (arriving, or whole and not received yet).
  uint64_t unexpectedBytesLocked(int peer) const;
  // An unexpected message is whole now: the receive waiting for it (taken out), or null.
  RequestPtr arrivedLocked(const UnexpectedPtr& entry);

  // Fails the posted receives and those waiting on a message still arriving for which
  // shouldFail(peer, tag) holds; such messages are dropped.
  template <typename Pred>
  void failLocked(const Error& error, Pred shouldFail);
  // abort() in shm: fails every posted and waiting receive; the unexpected messages stay.
  void failWaitingLocked(const Error& error);

  // Copies a whole unexpected message into `data` and completes `request`, the copy outside
  // `mutex` (not held on entry), the completion under it.
  static void deliver(const UnexpectedPtr& entry, const RequestPtr& request, uint8_t* data,
                      std::mutex& mutex, std::condition_variable& completed);

 private:
  enum class Found {
    kNothing,  // no message: post the receive (or refuse it)
    kSettled,  // the receive failed, or waits for a message still arriving
    kWhole,    // a whole message, taken out: deliver it outside the mutex
  };
  Found findUnexpectedLocked(const RequestPtr& request, uint8_t* data, UnexpectedPtr* whole);
  // Every removal from unexpected_ goes through here, so that held_ gives the bytes back.
  std::list<UnexpectedPtr>::iterator eraseUnexpected(std::list<UnexpectedPtr>::iterator it);

  std::list<PostedReceive> posted_;
  std::list<UnexpectedPtr> unexpected_;
  std::map<int, uint64_t> held_;  // by peer: bytes of its messages in unexpected_
};

template <typename Pred>
void ReceiveQueues::failLocked(const Error& error, Pred shouldFail) {
  for (auto it = posted_.begin(); it != posted_.end();) {
    if (shouldFail(it->request->peer(), it->request->tag())) {
      it->request->failLocked(error);
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = unexpected_.begin(); it != unexpected_.end();) {
    const UnexpectedPtr& entry = *it;
    if (!entry->complete && shouldFail(entry->peer, entry->tag)) {
      if (entry->waiter) entry->waiter->failLocked(error);
      it = eraseUnexpected(it);
    } else {
      ++it;
    }
  }
}

}  // namespace xccl::net
