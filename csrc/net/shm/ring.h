// The shared memory behind shm::ShmTransport (point-to-point between the ranks of one host): one
// file per host holding, per rank, a Mailbox (the word its progress thread sleeps on, its pid,
// its abort notice) and, per ordered pair of ranks, a single-producer single-consumer byte ring.
// The ring is a byte stream, like a TCP connection: frames (link.h) of any size flow
// through it in pieces as the consumer frees space.
//
// Lifetime as for the collective segment (segment.h): local rank 0 creates the file under a
// random name, every rank maps it, and the name is unlinked once every rank confirmed its
// mapping, before create() returns.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "net/store.h"

namespace xccl::net::shm {

// Bytes of one ring when they fit: halved (down to kMinRingBytes) until every ordered pair's
// ring fits in a quarter of /dev/shm's free space, which leaves room for the collective segment.
constexpr size_t kRingBytes = size_t{1} << 20;
constexpr size_t kMinRingBytes = size_t{64} << 10;
constexpr size_t kAbortReasonBytes = 512;

// One per rank. Anybody with work for this rank's progress thread (data in a ring to it, space
// freed in a ring from it, a send queued by its own caller) bumps `doorbell` and wakes it if
// `sleepers` says it may sleep (the Dekker pairing is explained in ring.cc).
struct alignas(128) Mailbox {
  std::atomic<uint32_t> doorbell;
  std::atomic<uint32_t> sleepers;
  std::atomic<int32_t> pid;      // written before the mapping is confirmed; for liveness
  std::atomic<uint32_t> aborted;  // 1 once `reason` is complete (release)
  char reason[kAbortReasonBytes];
};

// `head` counts bytes ever produced (only the producer stores it), `tail` bytes ever consumed
// (only the consumer): a 64-bit count never wraps, so full and empty are never confused.
struct RingIndices {
  alignas(128) std::atomic<uint64_t> head;
  alignas(128) std::atomic<uint64_t> tail;
};

class Ring {
 public:
  Ring() = default;
  Ring(RingIndices* indices, uint8_t* data, size_t capacity)
      : indices_(indices), data_(data), capacity_(capacity) {}

  // Producer only: copies as much of `bytes` as fits and publishes it (release); returns it.
  size_t write(const void* data, size_t bytes);
  // Consumer only: bytes ready to read (acquire), and reading/skipping them (then release).
  size_t readable() const;
  size_t read(void* out, size_t bytes);
  size_t skip(size_t bytes);

 private:
  void copyOut(uint64_t from, uint8_t* out, size_t bytes) const;

  RingIndices* indices_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
};

// The mapped file of one host's ranks (local ranks 0..size-1).
class Mailboxes {
 public:
  // Collective over the store among the host's ranks. Returns nullptr with *why when the file
  // cannot be made or mapped on some rank (then on every rank alike).
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
  void wake(int rank) const;
  // Sleeps on this rank's doorbell while it still reads `seen`, at most `timeout`.
  void sleep(int rank, uint32_t seen, std::chrono::nanoseconds timeout) const;

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

}  // namespace xccl::net::shm
