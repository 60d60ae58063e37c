// The byte rings behind shm_rings::ShmTransport: per ordered pair of ranks of one host a
// single-producer single-consumer ring in the host's shared file (mailboxes.h), and per rank a
// Mailbox (the word its progress thread sleeps on, its pid, its abort notice). The ring is a
// byte stream, like a TCP connection: frames (link.h) of any size flow through it in pieces as
// the consumer frees space.
//
// Both indices live in memory the peer can write. Every operation loads each index once, checks
// that `head - tail` lies in [0, capacity] and copies only within the ring: a peer that
// corrupts them is refused with an error naming it, never read or written past.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace xccl::net::shm_rings {

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

// Bumps `box`'s doorbell and wakes its progress thread if it sleeps.
void ringDoorbell(Mailbox& box);
// Sleeps on `box`'s doorbell while it still reads `seen`, at most `timeoutNs`.
void sleepOnDoorbell(Mailbox& box, uint32_t seen, int64_t timeoutNs);

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
  // The same ring, naming group rank `peer` (the other end) in its errors.
  Ring withPeer(int peer) const {
    Ring r = *this;
    r.peer_ = peer;
    return r;
  }

  // Producer only: copies as much of `bytes` as fits and publishes it (release); returns it.
  size_t write(const void* data, size_t bytes);
  // Consumer only: bytes ready to read (acquire), and reading/skipping them (then release).
  size_t readable() const;
  size_t read(void* out, size_t bytes);
  size_t skip(size_t bytes);
  // All of these throw kPeerFailure when the indices are corrupt.

  // The shared indices themselves (what a peer can write; for tests and the fuzzer).
  RingIndices& indices() const { return *indices_; }
  size_t capacity() const { return capacity_; }

 private:
  size_t used(uint64_t head, uint64_t tail) const;
  void copyOut(uint64_t from, uint8_t* out, size_t bytes) const;

  RingIndices* indices_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
  int peer_ = -1;
};

}  // namespace xccl::net::shm_rings
