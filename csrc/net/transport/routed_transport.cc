#include "net/transport/routed_transport.h"

#include <algorithm>

namespace xccl::net {

class RoutedTransport::Pair final : public Registration {
 public:
  Pair(std::unique_ptr<Registration> network, std::unique_ptr<Registration> host, void* data,
       size_t bytes)
      : network_(std::move(network)), host_(std::move(host)) {
    remote_.address = reinterpret_cast<uint64_t>(data);
    remote_.bytes = bytes;
    if (network_) remote_.key = network_->remote().key;
    if (host_) remote_.hostKey = host_->remote().key;
  }
  RemoteRegion remote() const override { return remote_; }

 private:
  std::unique_ptr<Registration> network_, host_;
  RemoteRegion remote_;
};

RoutedTransport::RoutedTransport(std::unique_ptr<Transport> network,
                                 std::unique_ptr<Transport> host, std::vector<bool> onHost)
    : network_(std::move(network)), host_(std::move(host)), onHost_(std::move(onHost)) {
  Transport& any = network_ ? *network_ : *host_;
  rank_ = any.rank();
  size_ = any.size();
  XCCL_CHECK_ARG(static_cast<int>(onHost_.size()) == size_, "onHost has ", onHost_.size(),
                 " entries for ", size_, " ranks");
  bool someOnHost = false, someOff = false;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    (host_ && onHost_[peer] ? someOnHost : someOff) = true;
  }
  XCCL_CHECK_ARG(network_ || !someOff, "peers off this host need a network transport");
  p2pOverNetwork_ = network_ && someOff;
  if (someOnHost && someOff) {
    name_ = std::string(host_->name()) + "+" + network_->name();
  } else {
    name_ = someOnHost ? host_->name() : any.name();
  }
}

// The transports go first (their progress threads may still run completions that take mutex_).
RoutedTransport::~RoutedTransport() {
  network_.reset();
  host_.reset();
}

Transport& RoutedTransport::routeOf(int peer, TagSpace space) const {
  if (space == TagSpace::kPointToPoint && p2pOverNetwork_) return *network_;
  if (peer >= 0 && peer < size_ && host_ && onHost_[peer]) return *host_;
  return network_ ? *network_ : *host_;
}

Transport& RoutedTransport::count(Transport& route) {
  (&route == host_.get() ? sentOverHost_ : sentOverNetwork_).fetch_add(1);
  return route;
}

Completion RoutedTransport::notifying(Completion onDone) {
  return [this, onDone = std::move(onDone)](const Request& request) {
    if (onDone) onDone(request);
    // The request is already done: taking the mutex orders this after a waiter's check, so the
    // notify cannot fall between its check and its sleep.
    std::lock_guard<std::mutex> guard(mutex_);
    completed_.notify_all();
  };
}

RequestPtr RoutedTransport::isend(int peer, MessageTag tag, const void* data, size_t bytes,
                                  Completion onDone) {
  return count(routeOf(peer, tag.space))
      .isend(peer, tag, data, bytes, notifying(std::move(onDone)));
}

RequestPtr RoutedTransport::irecv(int peer, MessageTag tag, void* data, size_t bytes,
                                  Completion onDone) {
  // A receive from any source stays on one transport: with mixed routes that can only be the
  // point-to-point route (the network); a collective never receives from any source.
  return routeOf(peer, tag.space).irecv(peer, tag, data, bytes, notifying(std::move(onDone)));
}

void RoutedTransport::wait(const std::vector<RequestPtr>& requests, Deadline deadline,
                           const std::string& what) {
  std::unique_lock<std::mutex> lock(mutex_);
  waitForRequests(lock, completed_, requests, deadline, what);
}

void RoutedTransport::abort(const std::string& reason) {
  if (host_) host_->abort(reason);
  if (network_) network_->abort(reason);
}

void RoutedTransport::setStatusProvider(std::function<std::string()> provider) {
  if (host_) host_->setStatusProvider(provider);
  if (network_) network_->setStatusProvider(std::move(provider));
}

std::vector<std::string> RoutedTransport::queryStatus(Deadline deadline) {
  // Each peer's answer comes from the transport its collectives take; the host transport is
  // asked first because it answers at once (no network round trip).
  std::vector<std::string> fromHost, fromNetwork;
  if (host_) fromHost = host_->queryStatus(deadline);
  if (network_) fromNetwork = network_->queryStatus(deadline);
  std::vector<std::string> replies(size_);
  for (int peer = 0; peer < size_; ++peer) {
    const bool viaHost = host_ && (peer == rank_ ? !network_ : onHost_[peer]);
    replies[peer] = viaHost ? fromHost[peer] : fromNetwork[peer];
  }
  return replies;
}

bool RoutedTransport::peerFailed(int peer, std::string* why) {
  Transport& route = routeOf(peer);
  if (route.peerFailed(peer, why)) return true;
  // The network carries this peer's point-to-point messages too: its loss there counts.
  return p2pOverNetwork_ && &route != network_.get() && network_->peerFailed(peer, why);
}

std::unique_ptr<Registration> RoutedTransport::registerMemory(void* data, size_t bytes) {
  auto tryRegister = [&](Transport* t) -> std::unique_ptr<Registration> {
    if (t == nullptr) return nullptr;
    try {
      return t->registerMemory(data, bytes);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kInvalidArgument) throw;
      return nullptr;  // no one-sided support: its iwrite names it when asked
    }
  };
  return std::make_unique<Pair>(tryRegister(network_.get()), tryRegister(host_.get()), data, bytes);
}

RequestPtr RoutedTransport::iwrite(int peer, const void* data, size_t bytes,
                                   const RemoteRegion& dst, uint64_t dstOffset, uint64_t signal,
                                   Completion onDone) {
  Transport& route = count(routeOf(peer));
  RemoteRegion region = dst;
  if (&route == host_.get()) region.key = dst.hostKey;  // the host transport knows only its key
  return route.iwrite(peer, data, bytes, region, dstOffset, signal, notifying(std::move(onDone)));
}

RequestPtr RoutedTransport::iwaitWrite(int peer, uint64_t signal, Completion onDone) {
  return routeOf(peer).iwaitWrite(peer, signal, notifying(std::move(onDone)));
}

}  // namespace xccl::net
