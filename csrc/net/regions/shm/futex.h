// Futex sleep and wake on a 32-bit word in memory that several processes map (shared-memory
// flags and window signal counters). Not FUTEX_PRIVATE: the word is shared between processes.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>

namespace xccl::net::shm {

// Sleeps while *word == expected, for `timeout` at most. EAGAIN (the word changed), EINTR and
// ETIMEDOUT all just mean "look again": callers loop and check their own condition.
inline void futexWait(std::atomic<uint32_t>* word, uint32_t expected,
                      std::chrono::nanoseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000000),
              static_cast<long>(timeout.count() % 1000000000)};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

inline void futexWakeAll(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace xccl::net::shm
