#include "net/transport/one_sided.h"

#include <algorithm>

#include "net/rendezvous/bootstrap.h"

namespace xccl::net {

RequestPtr WriteSignals::waitLocked(int peer, uint64_t signal, Completion onDone,
                                    PeerHealth& health) {
  XCCL_CHECK_ARG(signal != 0, "iwaitWrite: signal 0 means no signal; no write completes it");
  const MessageTag tag{TagSpace::kPointToPoint, 0, signal, 0};
  auto request = std::make_shared<Request>(peer, tag, 0, /*isSend=*/false, std::move(onDone));
  auto it = arrived_.find({peer, signal});
  if (it != arrived_.end()) {
    if (--it->second == 0) arrived_.erase(it);
    request->completeLocked(peer);
  } else if (const Error* refusal = health.refusalLocked(peer, tag.space)) {
    request->failLocked(*refusal);
  } else {
    waits_.push_back(request);
  }
  return request;
}

bool WriteSignals::arrivedLocked(int peer, uint64_t signal) {
  // Nobody waits for signal 0; counting it would grow arrived_ with every unsignalled put.
  if (signal == 0) return false;
  auto it = std::find_if(waits_.begin(), waits_.end(), [&](const RequestPtr& r) {
    return r->peer() == peer && r->tag().seq == signal;
  });
  if (it == waits_.end()) {
    ++arrived_[{peer, signal}];
    return false;
  }
  (*it)->completeLocked(peer);
  waits_.erase(it);
  return true;
}

void WriteSignals::failLocked(int peer, const Error& error) {
  waits_.remove_if([&](const RequestPtr& r) {
    if (peer >= 0 && r->peer() != peer) return false;
    r->failLocked(error);
    return true;
  });
}

RemoteRegion RegionTable::addLocked(void* data, size_t bytes) {
  RemoteRegion remote{reinterpret_cast<uint64_t>(data), bytes, 0};
  do {
    remote.key = randomToken();
  } while (remote.key == 0 || regions_.count(remote.key) != 0);
  regions_[remote.key] = {static_cast<uint8_t*>(data), bytes};
  return remote;
}

uint8_t* RegionTable::findLocked(uint64_t key, uint64_t offset, uint64_t bytes,
                                 std::string* why) const {
  auto it = regions_.find(key);
  if (it == regions_.end()) {
    *why = "no registration has that key (never registered, or deregistered)";
    return nullptr;
  }
  if (offset > it->second.bytes || bytes > it->second.bytes - offset) {
    *why = detail::concat("it does not fit the registered region of ", it->second.bytes, " bytes");
    return nullptr;
  }
  return it->second.data + offset;
}

}  // namespace xccl::net
