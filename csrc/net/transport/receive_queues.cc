#include "net/transport/receive_queues.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace xccl::net {

void ReceiveQueues::receive(const RequestPtr& request, uint8_t* data, const PeerHealth& health,
                            std::mutex& mutex, std::condition_variable& completed) {
  UnexpectedPtr whole;
  {
    std::lock_guard<std::mutex> guard(mutex);
    const Found found = findUnexpectedLocked(request, data, &whole);
    if (found == Found::kSettled) return;
    if (found == Found::kNothing) {
      if (const Error* refusal = health.refusalLocked(request->peer(), request->tag().space)) {
        request->failLocked(*refusal);
      } else {
        posted_.push_back({request, data});
      }
      return;
    }
  }
  deliver(whole, request, data, mutex, completed);
}

ReceiveQueues::Found ReceiveQueues::findUnexpectedLocked(const RequestPtr& request, uint8_t* data,
                                                         UnexpectedPtr* whole) {
  const int peer = request->peer();
  const MessageTag& tag = request->tag();
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    UnexpectedPtr entry = *it;
    if (entry->waiter || !(peer == kAnySource || peer == entry->peer)) continue;
    if (collectivesDiffer(tag, entry->tag)) {
      eraseUnexpected(it);
      request->failLocked(collectiveMismatch(entry->peer, tag, entry->tag));
      return Found::kSettled;
    }
    if (!(entry->tag == tag)) continue;
    if (entry->data.size() != request->bytes()) {
      eraseUnexpected(it);
      request->failLocked(
          sizeMismatchError(entry->peer, tag, entry->data.size(), request->bytes()));
      return Found::kSettled;
    }
    if (!entry->complete) {
      entry->waiter = request;
      entry->waiterData = data;
      return Found::kSettled;
    }
    eraseUnexpected(it);
    *whole = std::move(entry);
    return Found::kWhole;
  }
  return Found::kNothing;
}

ReceiveQueues::Match ReceiveQueues::matchPostedLocked(int peer, const MessageTag& tag,
                                                      uint64_t bytes, PostedReceive* matched) {
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    const RequestPtr& wanted = it->request;
    if (!(wanted->peer() == kAnySource || wanted->peer() == peer)) continue;
    Match result = Match::kFailed;
    if (collectivesDiffer(wanted->tag(), tag)) {
      // This rank is not running the collective the message belongs to.
      wanted->failLocked(collectiveMismatch(peer, wanted->tag(), tag));
    } else if (!(wanted->tag() == tag)) {
      continue;
    } else if (wanted->bytes() != bytes) {
      wanted->failLocked(sizeMismatchError(peer, tag, bytes, wanted->bytes()));
    } else {
      *matched = std::move(*it);
      result = Match::kMatched;
    }
    posted_.erase(it);
    return result;
  }
  return Match::kNone;
}

UnexpectedPtr ReceiveQueues::addUnexpectedLocked(int peer, const MessageTag& tag, uint64_t bytes,
                                                 uint64_t limit, const char* limitName) {
  const uint64_t held = unexpectedBytesLocked(peer);
  uint64_t after;
  if (__builtin_add_overflow(held, bytes, &after) || after > limit) {
    XCCL_THROW(ErrorKind::kPeerFailure, "rank ", peer, " sent a message of ", bytes,
               " bytes before its receive was posted, while ", held,
               " bytes of its earlier such messages are waiting here: more than the ", limit,
               " bytes allowed per rank (", limitName,
               "); nothing was allocated. Post receives before their sends, or raise the limit");
  }
  auto entry = std::make_shared<UnexpectedMessage>();
  entry->peer = peer;
  entry->tag = tag;
  entry->data.resize(bytes);
  unexpected_.push_back(entry);
  held_[peer] = after;
  return entry;
}

uint64_t ReceiveQueues::unexpectedBytesLocked(int peer) const {
  auto it = held_.find(peer);
  return it == held_.end() ? 0 : it->second;
}

std::list<UnexpectedPtr>::iterator ReceiveQueues::eraseUnexpected(
    std::list<UnexpectedPtr>::iterator it) {
  auto held = held_.find((*it)->peer);
  if (held != held_.end()) {
    held->second -= std::min<uint64_t>(held->second, (*it)->data.size());
    if (held->second == 0) held_.erase(held);
  }
  return unexpected_.erase(it);
}

RequestPtr ReceiveQueues::arrivedLocked(const UnexpectedPtr& entry) {
  entry->complete = true;
  RequestPtr waiter = entry->waiter;
  if (waiter) {
    auto it = std::find(unexpected_.begin(), unexpected_.end(), entry);
    if (it != unexpected_.end()) eraseUnexpected(it);
  }
  return waiter;
}

void ReceiveQueues::failWaitingLocked(const Error& error) {
  for (auto& p : posted_) p.request->failLocked(error);
  posted_.clear();
  for (auto& entry : unexpected_) {
    if (entry->waiter) entry->waiter->failLocked(error);
  }
}

void ReceiveQueues::deliver(const UnexpectedPtr& entry, const RequestPtr& request, uint8_t* data,
                            std::mutex& mutex, std::condition_variable& completed) {
  if (!entry->data.empty()) std::memcpy(data, entry->data.data(), entry->data.size());
  std::lock_guard<std::mutex> guard(mutex);
  if (!request->done()) request->completeLocked(entry->peer);
  completed.notify_all();
}

}  // namespace xccl::net
