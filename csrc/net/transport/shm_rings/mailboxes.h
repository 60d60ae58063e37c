// The shared file of one host's ranks behind shm_rings::ShmTransport: per rank a Mailbox, per
// ordered pair of ranks a Ring (ring.h).
//
// Lifetime as for the collective segment (segment.h): local rank 0 creates the file under a
// random name (mode 0600), every rank maps it, and the name is unlinked once every rank
// confirmed its mapping, before create() returns. The other ranks check the published name and
// the file (owner, mode, exact size: peer_file.h) before they map anything.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "net/rendezvous/store.h"
#include "net/transport/shm_rings/ring.h"

namespace xccl::net::shm_rings {

// Bytes of one ring when they fit: halved (down to kMinRingBytes) until every ordered pair's
// ring fits in a quarter of /dev/shm's free space, which leaves room for the collective segment.
constexpr size_t kRingBytes = size_t{1} << 20;
constexpr size_t kMinRingBytes = size_t{64} << 10;
constexpr const char* kRingFilePrefix = "xccl-p2p-";

class Mailboxes {
 public:
  // Collective over the store among the host's ranks (local ranks 0..size-1). Returns nullptr
  // with *why when the file cannot be made, checked or mapped on some rank (then on every rank).
  static std::unique_ptr<Mailboxes> create(Store& store, const std::string& prefix, int rank,
                                           int size, std::chrono::milliseconds timeout,
                                           std::string* why);
  ~Mailboxes();
  Mailboxes(const Mailboxes&) = delete;
  Mailboxes& operator=(const Mailboxes&) = delete;

  Mailbox& box(int rank) const { return boxes_[rank]; }
  Ring ring(int from, int to) const;
  size_t ringBytes() const { return ringBytes_; }
  // Bumps `rank`'s doorbell and wakes its progress thread if it sleeps.
  void wake(int rank) const { ringDoorbell(boxes_[rank]); }
  // Sleeps on this rank's doorbell while it still reads `seen`, at most `timeout`.
  void sleep(int rank, uint32_t seen, std::chrono::nanoseconds timeout) const {
    sleepOnDoorbell(boxes_[rank], seen, timeout.count());
  }

 private:
  Mailboxes(int size, size_t ringBytes) : size_(size), ringBytes_(ringBytes) {}

  const int size_;
  const size_t ringBytes_;
  uint8_t* base_ = nullptr;
  size_t mappedBytes_ = 0;
  Mailbox* boxes_ = nullptr;
  RingIndices* indices_ = nullptr;
  uint8_t* rings_ = nullptr;
};

}  // namespace xccl::net::shm_rings
