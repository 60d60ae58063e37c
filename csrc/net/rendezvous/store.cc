#include "net/rendezvous/store.h"

#include "common/error.h"

namespace xccl::net {

void MemoryStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    values_[key] = value;
  }
  changed_.notify_all();
}

Bytes MemoryStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  bool found = changed_.wait_for(lock, timeout, [&] { return values_.count(key) != 0; });
  if (!found)
    XCCL_THROW(ErrorKind::kTimeout, "store key '", key, "' not set within ", timeout.count(),
               " ms");
  return values_[key];
}

int64_t MemoryStore::add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> guard(mutex_);
  return counters_[key] += delta;
}

Bytes toBytes(const std::string& text) { return Bytes(text.begin(), text.end()); }
std::string toString(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

}  // namespace xccl::net
