// Registration cache for the buffers of sends, receives and RMA writes, for providers that need
// local memory registered (FI_MR_LOCAL: verbs, efa). Registering costs a system call and pins
// pages, so a buffer used again (the same tensor every step) reuses its registration. Bounded by
// XCCL_OFI_MR_CACHE_BYTES with least-recently-used eviction; an evicted registration stays valid
// for the operations still using it (they hold a reference) and is released after them.
//
// Limitation: an entry is found by address range, so memory freed and reallocated at the same
// address reuses the old registration. libfabric's own cache (memory monitors) is what catches
// that for verbs and efa; XCCL_OFI_MR_CACHE_BYTES=0 registers every operation afresh.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>

namespace xccl::net::ofi {

struct CacheStats {
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
};

// Totals over every cache of this process (python -m xccl doctor reports them).
CacheStats processCacheStats();

class RegistrationCache {
 public:
  // Registers [data, data + bytes) and returns the handle (a MemoryRegion in the transport).
  using Register = std::function<std::shared_ptr<void>(const void* data, size_t bytes)>;

  RegistrationCache(uint64_t capacityBytes, Register registerRange);
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // A registration covering [data, data + bytes): a cached one that contains the range, else a
  // new one (cached unless larger than the capacity). Thread-safe.
  std::shared_ptr<void> get(const void* data, size_t bytes);
  CacheStats stats() const;

 private:
  struct Entry {
    uintptr_t start;
    size_t bytes;
    std::shared_ptr<void> handle;
    std::list<uintptr_t>::iterator lru;
  };
  void evictLocked(uint64_t needed);

  const uint64_t capacity_;
  const Register register_;
  mutable std::mutex mutex_;
  std::map<uintptr_t, Entry> entries_;  // by start address
  std::list<uintptr_t> lru_;            // front: most recently used
  CacheStats stats_;
};

}  // namespace xccl::net::ofi
