// Logging with a "[xccl rank R subsystem]" prefix to stderr, filtered by XCCL_LOG_LEVEL.
#pragma once

#include <string>

#include "common/error.h"

namespace xccl::log {

enum class Level { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

bool enabled(Level level);
void write(Level level, const char* subsystem, const std::string& message);
// The rank printed in every line: -1 until the first communicator (normally the world group)
// sets it; later groups leave it alone.
void setRankOnce(int rank);

}  // namespace xccl::log

#define XCCL_LOG(level, subsystem, ...)                                              \
  do {                                                                               \
    if (::xccl::log::enabled(level)) {                                               \
      ::xccl::log::write((level), (subsystem), ::xccl::detail::concat(__VA_ARGS__)); \
    }                                                                                \
  } while (0)
#define XCCL_WARN(subsystem, ...) XCCL_LOG(::xccl::log::Level::kWarn, subsystem, __VA_ARGS__)
#define XCCL_INFO(subsystem, ...) XCCL_LOG(::xccl::log::Level::kInfo, subsystem, __VA_ARGS__)
#define XCCL_DEBUG(subsystem, ...) XCCL_LOG(::xccl::log::Level::kDebug, subsystem, __VA_ARGS__)
