// The key-value store every transport bootstraps through (the exchanges:
// net/rendezvous/bootstrap.h). The backend adapts c10d::Store to it; GoogleTests use MemoryStore
// with ranks as threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace xccl::net {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits until `key` exists; throws kTimeout after `timeout`.
  virtual Bytes get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
};

// In-process store shared by threads acting as ranks.
class MemoryStore : public Store {
 public:
  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Bytes> values_;
  std::map<std::string, int64_t> counters_;
};

Bytes toBytes(const std::string& text);
std::string toString(const Bytes& bytes);

}  // namespace xccl::net
