#include "net/transport/ofi/cache.h"

#include <atomic>

namespace xccl::net::ofi {
namespace {

// Process-wide totals; each cache adds its own changes (signed deltas for entries and bytes).
struct Totals {
  std::atomic<int64_t> entries{0}, bytes{0};
  std::atomic<uint64_t> hits{0}, misses{0}, evictions{0};
};
Totals& totals() {
  static Totals t;
  return t;
}

}  // namespace

CacheStats processCacheStats() {
  Totals& t = totals();
  CacheStats s;
  s.entries = static_cast<uint64_t>(t.entries.load());
  s.bytes = static_cast<uint64_t>(t.bytes.load());
  s.hits = t.hits.load();
  s.misses = t.misses.load();
  s.evictions = t.evictions.load();
  return s;
}

RegistrationCache::RegistrationCache(uint64_t capacityBytes, Register registerRange)
    : capacity_(capacityBytes), register_(std::move(registerRange)) {}

RegistrationCache::~RegistrationCache() {
  totals().entries -= static_cast<int64_t>(stats_.entries);
  totals().bytes -= static_cast<int64_t>(stats_.bytes);
}

std::shared_ptr<void> RegistrationCache::get(const void* data, size_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = entries_.upper_bound(start);
  if (it != entries_.begin()) {
    Entry& e = std::prev(it)->second;
    if (e.start + e.bytes >= start + bytes) {
      lru_.splice(lru_.begin(), lru_, e.lru);
      ++stats_.hits;
      ++totals().hits;
      return e.handle;
    }
  }
  ++stats_.misses;
  ++totals().misses;
  std::shared_ptr<void> handle = register_(data, bytes);
  if (bytes > capacity_) return handle;  // used once, released when the operation is done
  evictLocked(bytes);
  // A smaller registration at the same start is replaced by this one, which covers it.
  auto same = entries_.find(start);
  if (same != entries_.end()) {
    lru_.erase(same->second.lru);
    stats_.bytes -= same->second.bytes;
    totals().bytes -= static_cast<int64_t>(same->second.bytes);
    --stats_.entries;
    --totals().entries;
    entries_.erase(same);
  }
  lru_.push_front(start);
  entries_[start] = Entry{start, bytes, handle, lru_.begin()};
  ++stats_.entries;
  ++totals().entries;
  stats_.bytes += bytes;
  totals().bytes += static_cast<int64_t>(bytes);
  return handle;
}

void RegistrationCache::evictLocked(uint64_t needed) {
  while (!lru_.empty() && stats_.bytes + needed > capacity_) {
    auto victim = entries_.find(lru_.back());
    lru_.pop_back();
    stats_.bytes -= victim->second.bytes;
    totals().bytes -= static_cast<int64_t>(victim->second.bytes);
    --stats_.entries;
    --totals().entries;
    ++stats_.evictions;
    ++totals().evictions;
    entries_.erase(victim);  // the registration goes once no operation holds it
  }
}

CacheStats RegistrationCache::stats() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return stats_;
}

}  // namespace xccl::net::ofi
