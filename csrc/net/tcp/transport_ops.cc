// TcpTransport's caller-facing operations and failure handling (the mesh and the progress
// thread are in transport.cc).
#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>

#include "common/logging.h"
#include "net/tcp/transport.h"

namespace xccl::net::tcp {
namespace {

RequestPtr failed(RequestPtr request, const Error& error) {
  request->failLocked(error);
  return request;
}

}  // namespace

const Error* TcpTransport::refusalLocked(int peer, TagSpace space) const {
  if (abortError_) return abortError_.get();
  if (space == TagSpace::kCollective && collectiveError_) return collectiveError_.get();
  if (peer != kAnySource && peerError_[peer]) return peerError_[peer].get();
  return nullptr;
}

RequestPtr TcpTransport::isend(int peer, MessageTag tag, const void* data, size_t bytes,
                               Completion onDone) {
  XCCL_CHECK_ARG(peer >= 0 && peer < size_ && peer != rank_, "cannot send to rank ", peer,
                 " from rank ", rank_, " of ", size_);
  auto request = std::make_shared<Request>(peer, tag, bytes, /*isSend=*/true, std::move(onDone));
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (const Error* refusal = refusalLocked(peer, tag.space)) return failed(request, *refusal);
  }
  FrameHeader header;
  header.space = tag.space;
  header.step = tag.step;
  header.seq = tag.seq;
  header.op = tag.op;
  header.bytes = bytes;
  std::vector<RequestPtr> completed;
  try {
    connections_[peer]->enqueue(header, data, request, &completed);
  } catch (const Error& e) {
    std::lock_guard<std::mutex> guard(mutex_);
    const Error* refusal = refusalLocked(peer, tag.space);
    return failed(request, refusal ? *refusal : e);
  }
  completeAll(completed);
  return request;
}

RequestPtr TcpTransport::irecv(int peer, MessageTag tag, void* data, size_t bytes,
                               Completion onDone) {
  XCCL_CHECK_ARG(peer == kAnySource || (peer >= 0 && peer < size_ && peer != rank_),
                 "cannot receive from rank ", peer, " on rank ", rank_, " of ", size_);
  auto request = std::make_shared<Request>(peer, tag, bytes, /*isSend=*/false, std::move(onDone));
  UnexpectedPtr ready;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
      UnexpectedPtr entry = *it;
      if (entry->waiter || !(peer == kAnySource || peer == entry->peer)) continue;
      if (collectivesDiffer(tag, entry->tag)) {
        unexpected_.erase(it);
        return failed(request, collectiveMismatch(entry->peer, tag, entry->tag));
      }
      if (!(entry->tag == tag)) continue;
      if (entry->data.size() != bytes) {
        unexpected_.erase(it);
        return failed(request,
                      Error(ErrorKind::kPeerFailure,
                            detail::concat("rank ", entry->peer, " sent ", entry->data.size(),
                                           " bytes for ", describe(tag), " where ", bytes,
                                           " were expected (the ranks called "
                                           "different collectives, or with different "
                                           "sizes)")));
      }
      if (!entry->complete) {
        entry->waiter = request;
        entry->waiterData = static_cast<uint8_t*>(data);
        return request;
      }
      unexpected_.erase(it);
      ready = entry;
      break;
    }
    if (!ready) {
      if (const Error* refusal = refusalLocked(peer, tag.space)) return failed(request, *refusal);
      posted_.push_back({request, static_cast<uint8_t*>(data)});
      return request;
    }
  }
  deliverUnexpected(ready, request, static_cast<uint8_t*>(data));
  return request;
}

void TcpTransport::wait(const std::vector<RequestPtr>& requests, Deadline deadline,
                        const std::string& what) {
  auto allDone = [&] {
    for (const auto& r : requests) {
      if (!r->done()) return false;
    }
    return true;
  };
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!completed_.wait_until(lock, deadline, allDone)) {
      XCCL_THROW(ErrorKind::kTimeout, describeTimeout(requests, what));
    }
  }
  for (const auto& r : requests) {
    try {
      r->rethrowIfFailed();
    } catch (const Error& e) {
      throw Error(e.kind(), what + " failed: " + e.what());
    }
  }
}

void TcpTransport::completeAll(const std::vector<RequestPtr>& requests) {
  if (requests.empty()) return;
  std::lock_guard<std::mutex> guard(mutex_);
  for (const auto& r : requests) {
    if (!r->done()) r->completeLocked(r->peer());
  }
  completed_.notify_all();
}

template <typename Pred>
void TcpTransport::failReceivesLocked(const Error& error, Pred shouldFail) {
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
      it = unexpected_.erase(it);
    } else {
      ++it;
    }
  }
}

void TcpTransport::failPeer(int peer, const Error& error, bool failAllCollectives) {
  XCCL_INFO("tcp", error.what());
  std::vector<RequestPtr> sends = connections_[peer]->closeSends(nullptr);
  ::epoll_ctl(epollFd_, EPOLL_CTL_DEL, connections_[peer]->fd(), nullptr);
  Inflight slot = std::move(inflight_[peer]);
  inflight_[peer] = Inflight{};
  std::lock_guard<std::mutex> guard(mutex_);
  if (!peerError_[peer]) peerError_[peer] = std::make_unique<Error>(error);
  if (failAllCollectives && !collectiveError_) collectiveError_ = std::make_unique<Error>(error);
  for (auto& r : sends) r->failLocked(error);
  if (slot.request) slot.request->failLocked(error);
  if (slot.unexpected && slot.unexpected->waiter) slot.unexpected->waiter->failLocked(error);
  failReceivesLocked(error, [&](int from, const MessageTag& tag) {
    return from == peer || (failAllCollectives && tag.space == TagSpace::kCollective);
  });
  completed_.notify_all();
}

void TcpTransport::failAll(const Error& error) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!abortError_) abortError_ = std::make_unique<Error>(error);
  failEverythingLocked(error);
}

void TcpTransport::failEverythingLocked(const Error& error) {
  failReceivesLocked(error, [](int, const MessageTag&) { return true; });
  for (auto& slot : inflight_) {
    if (slot.request) slot.request->failLocked(error);
    if (slot.unexpected && slot.unexpected->waiter) slot.unexpected->waiter->failLocked(error);
    slot = Inflight{};
  }
  completed_.notify_all();
}

void TcpTransport::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (abortError_) return;
    abortError_ = std::make_unique<Error>(ErrorKind::kAborted, "communicator aborted: " + reason);
  }
  XCCL_INFO("tcp", "aborting: ", reason);
  // Stop the progress thread first so nothing below races with it.
  if (progressThread_.joinable()) {
    uint64_t one = 1;
    (void)!::write(wakeFd_, &one, sizeof(one));
    progressThread_.join();
  }
  std::vector<RequestPtr> sends;
  for (auto& conn : connections_) {
    if (!conn) continue;
    for (auto& r : conn->closeSends(&reason)) sends.push_back(std::move(r));
    conn->shutdownSocket();
  }
  std::lock_guard<std::mutex> guard(mutex_);
  for (auto& r : sends) r->failLocked(*abortError_);
  failEverythingLocked(*abortError_);
}

bool TcpTransport::peerFailed(int peer, std::string* why) {
  std::lock_guard<std::mutex> guard(mutex_);
  const Error* error = abortError_ ? abortError_.get() : peerError_[peer].get();
  if (error != nullptr && why != nullptr) *why = error->what();
  return error != nullptr;
}

void TcpTransport::setStatusProvider(std::function<std::string()> provider) {
  std::lock_guard<std::mutex> guard(mutex_);
  statusProvider_ = std::move(provider);
}

void TcpTransport::sendControl(int peer, FrameType type, uint64_t seq, const std::string& payload) {
  // The payload must outlive the asynchronous write: the completion keeps it.
  auto text = std::make_shared<std::string>(payload);
  FrameHeader header;
  header.type = type;
  header.seq = seq;
  header.bytes = text->size();
  auto request = std::make_shared<Request>(peer, MessageTag{}, text->size(), /*isSend=*/true,
                                           [text](const Request&) {});
  std::vector<RequestPtr> completed;
  try {
    connections_[peer]->enqueue(header, text->data(), request, &completed);
  } catch (const Error&) {
    return;  // the peer is gone; its failure is reported elsewhere
  }
  completeAll(completed);
}

std::vector<std::string> TcpTransport::queryStatus(Deadline deadline) {
  std::vector<int> asked;
  uint64_t round;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    round = ++statusRound_;
    for (int peer = 0; peer < size_; ++peer) {
      statusReplies_[peer].clear();
      if (peer == rank_) continue;
      if (peerError_[peer]) {
        statusReplies_[peer] = "!" + std::string(peerError_[peer]->what());
      } else if (!abortError_) {
        asked.push_back(peer);
      }
    }
  }
  for (int peer : asked) sendControl(peer, FrameType::kStatusQuery, round, "");
  std::unique_lock<std::mutex> lock(mutex_);
  completed_.wait_until(lock, deadline, [&] {
    for (int peer : asked) {
      if (statusReplies_[peer].empty()) return false;
    }
    return true;
  });
  std::vector<std::string> replies = statusReplies_;
  auto provider = statusProvider_;
  lock.unlock();
  replies[rank_] = provider ? provider() : "";
  return replies;
}

}  // namespace xccl::net::tcp
