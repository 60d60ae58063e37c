#include "net/transport/peer_health.h"

namespace xccl::net {

const Error* PeerHealth::refusalLocked(int peer, TagSpace space) const {
  if (abortError_) return abortError_.get();
  if (space == TagSpace::kCollective && collectiveError_) return collectiveError_.get();
  if (peer != kAnySource && peerError_[peer]) return peerError_[peer].get();
  return nullptr;
}

void PeerHealth::markFailedLocked(int peer, const Error& error, bool failAllCollectives) {
  if (!peerError_[peer]) peerError_[peer] = std::make_unique<Error>(error);
  if (failAllCollectives && !collectiveError_) collectiveError_ = std::make_unique<Error>(error);
}

bool PeerHealth::abortLocked(const std::string& reason) {
  if (abortError_) return false;
  abortError_ = std::make_unique<Error>(ErrorKind::kAborted, "communicator aborted: " + reason);
  return true;
}

void PeerHealth::failAllLocked(const Error& error) {
  if (!abortError_) abortError_ = std::make_unique<Error>(error);
}

bool PeerHealth::failedLocked(int peer, std::string* why) const {
  const Error* error = abortError_ ? abortError_.get() : peerError_[peer].get();
  if (error != nullptr && why != nullptr) *why = error->what();
  return error != nullptr;
}

}  // namespace xccl::net
