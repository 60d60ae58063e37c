// The target's side of one-sided writes (net/transport/transport.h) that transports share: the
// signals (every transport) and the table of registrations (the transports that place written bytes
// themselves: tcp, shm).
//
// Not locked themselves: every method needs the owning transport's mutex held (the one whose
// condition variable the waiters sleep on).
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <utility>

#include "net/transport/peer_health.h"
#include "net/transport/transport.h"

namespace xccl::net {

// Waits posted before their signal, and signals that came first, counted per (writer, signal),
// each completing one wait, oldest first. Signal 0 is no signal.
class WriteSignals {
 public:
  // iwaitWrite once the peer is checked: a request (peer = the writer, tag.seq = the signal)
  // completed from a counted arrival, failed with the peer's refusal, or kept. Throws
  // kInvalidArgument for signal 0, which no write completes.
  RequestPtr waitLocked(int peer, uint64_t signal, Completion onDone, PeerHealth& health);
  // A write from `peer` is in place: its signal completes the oldest wait for it, or is counted.
  // Returns whether a wait completed (the caller notifies its waiters).
  bool arrivedLocked(int peer, uint64_t signal);
  // Fails the waits for `peer`'s signals; every peer's when `peer` is -1.
  void failLocked(int peer, const Error& error);

 private:
  std::list<RequestPtr> waits_;
  std::map<std::pair<int, uint64_t>, uint64_t> arrived_;
};

// Registered ranges by key: random, non-zero and unique among the table's, so a key that was
// deregistered is not found again by chance.
class RegionTable {
 public:
  RemoteRegion addLocked(void* data, size_t bytes);
  void removeLocked(uint64_t key) { regions_.erase(key); }
  // Where a write of `bytes` at `offset` into registration `key` goes; null with *why (naming
  // the region's size) when no registration has that key or the write does not fit it.
  uint8_t* findLocked(uint64_t key, uint64_t offset, uint64_t bytes, std::string* why) const;

 private:
  struct Region {
    uint8_t* data;
    size_t bytes;
  };
  std::map<uint64_t, Region> regions_;
};

}  // namespace xccl::net
