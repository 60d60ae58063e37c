#include "common/logging.h"

#include <atomic>
#include <cstdio>

#include "common/env.h"
#include "common/error.h"

namespace xccl::log {
namespace {

std::atomic<int> gRank{-1};

Level parseLevel() {
  // Logging must never throw (it runs in destructors and progress threads): a bad value logs at
  // the default level here and is reported by env::checkAll() at group creation.
  std::string value;
  try {
    value = env::getString("XCCL_LOG_LEVEL");
  } catch (const Error&) {
    return Level::kWarn;
  }
  if (value == "error") return Level::kError;
  if (value == "info") return Level::kInfo;
  if (value == "debug") return Level::kDebug;
  return Level::kWarn;
}

const char* levelName(Level level) {
  switch (level) {
    case Level::kError: return "ERROR";
    case Level::kWarn: return "WARN";
    case Level::kInfo: return "INFO";
    case Level::kDebug: return "DEBUG";
  }
  return "?";
}

}  // namespace

bool enabled(Level level) {
  static const Level threshold = parseLevel();
  return static_cast<int>(level) <= static_cast<int>(threshold);
}

void write(Level level, const char* subsystem, const std::string& message) {
  // One fprintf per line so lines from several threads do not interleave mid-line.
  std::fprintf(stderr, "[xccl rank %d %s] %s: %s\n", gRank.load(), subsystem, levelName(level),
               message.c_str());
}

bool RateLimiter::allow(uint64_t* suppressed) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> guard(mutex_);
  if (written_ == 0 || now >= windowEnd_) {
    windowEnd_ = now + interval_;
    written_ = 0;
  }
  if (written_ >= burst_) {
    ++suppressed_;
    return false;
  }
  ++written_;
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

std::string suppressedNote(uint64_t suppressed) {
  if (suppressed == 0) return "";
  return detail::concat(" (", suppressed, " more like this suppressed)");
}

void setRankOnce(int rank) {
  int unset = -1;
  gRank.compare_exchange_strong(unset, rank);
}

}  // namespace xccl::log
