// The byte layout of a segment, shared by its creation (segment.cc) and its flags (flags.cc).
//
//   [0, 4096)               Header, written by rank 0 before it publishes the name
//   [4096, slotsOffset)     one RankFlag per rank, 128 bytes apart (adjacent-line prefetchers
//                           pull cache lines in pairs, so 64 would still share traffic)
//   [slotsOffset, pools)    per rank: slot parity 0, slot parity 1, each slotBytes (whole pages)
//   [pools, total)          per rank: its pool (pool.h), poolBytes (whole pages; may be 0)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "net/regions/shm/segment.h"

namespace xccl::net::shm {

constexpr size_t kPageBytes = 4096;
constexpr uint64_t kHeaderMagic = 0x5843434c53484d31ull;  // "XCCLSHM1"

struct Header {
  uint64_t magic;
  uint64_t size;
  uint64_t slotBytes;
  uint64_t totalBytes;
  uint64_t poolBytes;
};

// One writer per word: only the owning rank stores `arrived` and `signature`; `sleepers` is a
// counter the readers increment around a futex sleep, so the owner skips the wake syscall when it
// is zero. `signature` (Segment::setSignature) shares the line with `arrived`: a reader that just
// loaded the flag finds it in its cache.
struct alignas(128) RankFlag {
  std::atomic<uint32_t> arrived;
  std::atomic<uint32_t> sleepers;
  std::atomic<uint64_t> signature;
  // Per step parity: where this rank's input of the current all_gather/reduce_scatter lies in its
  // pool (offset + 1; 0: in its slots). Written in a step that writes the slot of that parity,
  // so the slot-reuse invariant protects it exactly as it protects the slot (docs/shm.md).
  std::atomic<uint64_t> direct[2];
  // Per step parity: the address of this rank's buffer for peers' process_vm_readv (cma.h);
  // written and protected like `direct`.
  std::atomic<uint64_t> address[2];
  // When this rank last woke sleepers on `arrived` (steady clock, ns; the same clock in every
  // process of the host): a woken waiter measures the wake-up cost from it (spin_policy.h).
  std::atomic<int64_t> wokeAt;
  // 0 while this rank's collectives succeed; once one failed here (Segment::markBroken), 1 + the
  // rank it found failed (its own when the cause was not a peer). A peer waiting for this rank
  // reads it instead of waiting out its deadline: a rank that left a collective early (a
  // single-copy read of a dead peer's memory fails outside any wait) never reaches its next step.
  // Written by a peer: a value out of range names this rank.
  std::atomic<uint32_t> failed;
  // When this rank last showed it holds a core inside a collective (steady clock, ns): stamped
  // when it publishes a step and while it spins. A waiter spins on while the ranks it waits for
  // stamped recently (spin_policy.h). Read as any peer word: every value is safe.
  std::atomic<int64_t> runningAt;
};
static_assert(sizeof(RankFlag) == 128, "one flag line per rank");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "flags must work across processes");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "flags must work across processes");
static_assert(sizeof(std::atomic<uint32_t>) == 4, "futex words are 32 bits");

constexpr size_t roundUp(size_t value, size_t unit) { return (value + unit - 1) / unit * unit; }

struct Layout {
  size_t flagsOffset;
  size_t slotsOffset;
  size_t poolsOffset;
  size_t totalBytes;

  static Layout of(int size, size_t slotBytes, size_t poolBytes = 0) {
    Layout l;
    l.flagsOffset = kPageBytes;
    l.slotsOffset = l.flagsOffset + roundUp(size * sizeof(RankFlag), kPageBytes);
    l.poolsOffset = l.slotsOffset + 2 * static_cast<size_t>(size) * slotBytes;
    l.totalBytes = l.poolsOffset + static_cast<size_t>(size) * poolBytes;
    return l;
  }
  // As of(), for sizes from the store: false when any offset overflows.
  static bool checkedOf(int size, size_t slotBytes, size_t poolBytes, Layout* l) {
    const size_t n = static_cast<size_t>(size);
    size_t slots, pools;
    l->flagsOffset = kPageBytes;
    l->slotsOffset = l->flagsOffset + roundUp(n * sizeof(RankFlag), kPageBytes);
    return !__builtin_mul_overflow(2 * n, slotBytes, &slots) &&
           !__builtin_mul_overflow(n, poolBytes, &pools) &&
           !__builtin_add_overflow(l->slotsOffset, slots, &l->poolsOffset) &&
           !__builtin_add_overflow(l->poolsOffset, pools, &l->totalBytes);
  }
  size_t slotsOf(int rank, size_t slotBytes) const { return slotsOffset + 2 * rank * slotBytes; }
};

}  // namespace xccl::net::shm
