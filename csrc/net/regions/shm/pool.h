// Per-rank memory pools inside a group's shared-memory segment: tensors allocated from a rank's
// pool lie in memory every peer has mapped, so the shm collectives can read them where they are
// instead of copying them through the slots first (zero copy; docs/shm.md, "Tensors in the
// pool").
//
// The segment's file holds one pool region per rank after the slots; every rank maps all of them
// (read by peers, allocated only by their owner). Pages are reserved (posix_fallocate) when an
// allocation first reaches them, so an unused pool costs no /dev/shm space and a full /dev/shm
// makes allocate() return nullptr instead of a SIGBUS at first touch.
//
// Lifetime: the Segment holds a shared_ptr and so does every live allocation (the backend's
// tensor deleters), so the mapping outlives the group while tensors from it exist.
// Threads: allocate/release/stats take the pool's mutex (a tensor may die on any thread);
// the traffic counters are atomics written by the collective's thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

namespace xccl::net::shm {

// Allocation granularity: a cache-line multiple, so vector loads on pool tensors never split.
constexpr size_t kPoolAlignment = 256;

struct PoolStats {
  size_t bytes = 0;  // this rank's pool capacity
  size_t reserved = 0;  // pages reserved in /dev/shm so far (never given back)
  size_t inUse = 0;  // bytes of live allocations (rounded to kPoolAlignment)
  uint64_t allocations = 0;  // successful allocate() calls
  uint64_t failures = 0;  // allocate() calls that found no room or could not reserve pages
};

class Pool {
 public:
  // Maps `ranks` regions of `bytesPerRank` starting at `offset` of the segment file `fd` (dup'ed
  // and kept for reserving pages). `offset` and `bytesPerRank` are page multiples.
  Pool(int fd, size_t offset, size_t bytesPerRank, int ranks, int rank);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // `bytes` (rounded up to kPoolAlignment) of this rank's region, or nullptr when the region has
  // no free block that large or /dev/shm cannot reserve its pages. Zero bytes take one unit.
  void* allocate(size_t bytes);
  // Returns a block allocate() gave; adjacent free blocks merge.
  void release(void* data);

  // Where [data, data + bytes) lies in this rank's region, if entirely inside it.
  std::optional<size_t> offsetOf(const void* data, size_t bytes) const;
  // Rank `rank`'s bytes [offset, offset + bytes); throws (kPeerFailure) when a peer published a
  // range outside its region.
  const uint8_t* of(int rank, size_t offset, size_t bytes) const;

  size_t bytesPerRank() const { return bytesPerRank_; }
  PoolStats stats() const;

 private:
  const int rank_;
  const size_t bytesPerRank_;
  int fd_ = -1;
  size_t offset_ = 0;  // of the pools in the file
  uint8_t* base_ = nullptr;  // all ranks' regions, rank r at base_ + r * bytesPerRank_
  size_t mappedBytes_ = 0;

  mutable std::mutex mutex_;
  std::map<size_t, size_t> free_;  // offset -> length in this rank's region, disjoint, merged
  std::map<size_t, size_t> used_;  // offset -> length of live allocations
  size_t reservedEnd_ = 0;  // pages [0, reservedEnd_) of this rank's region are reserved
  PoolStats stats_;
};

// What the shm collectives moved for all_gather and reduce_scatter on one segment: bytes this
// rank copied into its slots, bytes it read straight from a peer's (or its own) pool, and how
// many of those calls had this rank's input in its pool. Read by the backend's memory stats.
struct Traffic {
  std::atomic<uint64_t> staged{0};
  std::atomic<uint64_t> direct{0};
  std::atomic<uint64_t> directCalls{0};
  // Bytes this rank read from peers' memory with process_vm_readv (cma.h), all collectives.
  std::atomic<uint64_t> cma{0};
};

}  // namespace xccl::net::shm
