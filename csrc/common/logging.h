// Logging with a "[xccl rank R subsystem]" prefix to stderr, filtered by XCCL_LOG_LEVEL.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "common/error.h"

namespace xccl::log {

enum class Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

bool enabled(Level level);
void write(Level level, const char* subsystem, const std::string& message);
// The rank printed in every line: -1 until the first communicator (normally the world group)
// sets it; later groups leave it alone.
void setRankOnce(int rank);

// For a line that strangers or a failing system can make repeat without bound (refused
// connections, evictions, a full descriptor table): the first `burst` lines are written, then none
// until `interval` has passed since the first of them; the next line written says how many like
// it were left out meanwhile. Thread-safe. Used through XCCL_WARN_LIMITED.
class RateLimiter {
 public:
  explicit RateLimiter(std::chrono::milliseconds interval = std::chrono::seconds(10),
                       uint64_t burst = 1)
      : interval_(interval), burst_(burst) {}
  // Whether to write a line now; if so, `*suppressed` is how many were left out before it.
  bool allow(uint64_t* suppressed);

 private:
  const std::chrono::milliseconds interval_;
  const uint64_t burst_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point windowEnd_{};
  uint64_t written_ = 0;  // in the current window
  uint64_t suppressed_ = 0;
};

// " (N more like this suppressed)", or "" for none.
std::string suppressedNote(uint64_t suppressed);

}  // namespace xccl::log

#define XCCL_LOG(level, subsystem, ...)                                              \
  do {                                                                               \
    if (::xccl::log::enabled(level)) {                                               \
      ::xccl::log::write((level), (subsystem), ::xccl::detail::concat(__VA_ARGS__)); \
    }                                                                                \
  } while (0)
#define XCCL_WARN(subsystem, ...) XCCL_LOG(::xccl::log::Level::kWarn, subsystem, __VA_ARGS__)
#define XCCL_INFO(subsystem, ...) XCCL_LOG(::xccl::log::Level::kInfo, subsystem, __VA_ARGS__)
#define XCCL_WARN_LIMITED(limiter, subsystem, ...)                                              \
  do {                                                                                          \
    uint64_t xcclSuppressed_ = 0;                                                               \
    if (::xccl::log::enabled(::xccl::log::Level::kWarn) && (limiter).allow(&xcclSuppressed_)) { \
      ::xccl::log::write(::xccl::log::Level::kWarn, (subsystem),                                \
                         ::xccl::detail::concat(__VA_ARGS__,                                    \
                                                ::xccl::log::suppressedNote(xcclSuppressed_))); \
    }                                                                                           \
  } while (0)
#define XCCL_DEBUG(subsystem, ...) XCCL_LOG(::xccl::log::Level::kDebug, subsystem, __VA_ARGS__)
