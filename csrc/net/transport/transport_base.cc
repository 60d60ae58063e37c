#include "net/transport/transport_base.h"

#include "common/error.h"
#include "common/logging.h"

namespace xccl::net {

void TransportBase::setStatusProvider(std::function<std::string()> provider) {
  status_.setProvider(std::move(provider));
}

bool TransportBase::peerFailed(int peer, std::string* why) {
  std::lock_guard<std::mutex> guard(mutex_);
  return health_.failedLocked(peer, why);
}

RequestPtr TransportBase::iwaitWrite(int peer, uint64_t signal, Completion onDone) {
  checkPeer(peer, /*sending=*/false);
  std::lock_guard<std::mutex> guard(mutex_);
  return signals_.waitLocked(peer, signal, std::move(onDone), health_);
}

void TransportBase::checkPeer(int peer, bool sending) const {
  if (sending) {
    XCCL_CHECK_ARG(peer >= 0 && peer < size_ && peer != rank_, "cannot send to rank ", peer,
                   " from rank ", rank_, " of ", size_);
  } else {
    XCCL_CHECK_ARG(peer >= 0 && peer < size_ && peer != rank_, "cannot wait for a write from rank ",
                   peer, " on rank ", rank_, " of ", size_);
  }
}

RequestPtr TransportBase::newSend(int peer, MessageTag tag, size_t bytes, Completion onDone,
                                  bool* refused) {
  checkPeer(peer, /*sending=*/true);
  auto request = std::make_shared<Request>(peer, tag, bytes, /*isSend=*/true, std::move(onDone));
  std::lock_guard<std::mutex> guard(mutex_);
  const Error* refusal = health_.refusalLocked(peer, tag.space);
  *refused = refusal != nullptr;
  return *refused ? failedRequest(request, *refusal) : request;
}

void TransportBase::wait(const std::vector<RequestPtr>& requests, Deadline deadline,
                         const std::string& what) {
  std::unique_lock<std::mutex> lock(mutex_);
  waitForRequests(lock, completed_, requests, deadline, what);
}

void TransportBase::completeAll(const std::vector<RequestPtr>& requests) {
  if (requests.empty()) return;
  std::lock_guard<std::mutex> guard(mutex_);
  for (const auto& r : requests) {
    if (!r->done()) r->completeLocked(r->peer());
  }
  completed_.notify_all();
}

void TransportBase::onControl(int peer, ControlKind kind, uint64_t round, const std::string& text) {
  switch (kind) {
    case ControlKind::kAbort:
      failPeer(peer,
               Error(ErrorKind::kPeerFailure,
                     detail::concat("rank ", peer, " aborted the communicator: ", text)),
               true);
      return;
    case ControlKind::kStatusQuery:
      sendControl(peer, ControlKind::kStatusReply, round, status_.answer());
      return;
    case ControlKind::kStatusReply: status_.reply(peer, round, text); return;
  }
  // Unreachable: every engine's header check refuses an unknown kind (WireControl::validate).
  XCCL_WARN(name(), "rank ", peer, " sent an unknown control kind ", static_cast<unsigned>(kind));
}

void TransportBase::failPeer(int peer, const Error& error, bool failAllCollectives) {
  XCCL_INFO(name(), error.what());
  std::vector<RequestPtr> sends = dropPeer(peer);
  std::lock_guard<std::mutex> guard(mutex_);
  health_.markFailedLocked(peer, error, failAllCollectives);
  for (auto& r : sends) r->failLocked(error);
  failPeerLocked(PeerLoss{peer, failAllCollectives}, error);
  signals_.failLocked(peer, error);
  completed_.notify_all();
}

void TransportBase::failEverythingLocked(const Error& error) {
  failRequestsLocked(error);
  signals_.failLocked(-1, error);
  completed_.notify_all();
}

void TransportBase::failAll(const Error& error) {
  std::lock_guard<std::mutex> guard(mutex_);
  health_.failAllLocked(error);
  failEverythingLocked(error);
}

}  // namespace xccl::net
