// For tests of readers that must refuse a FIFO rather than open it (common/files.h): a FIFO
// blocks open() until a writer comes, so an unfixed reader would hang the test run. This runs the
// read and, when it is still going after a bound, plays the writer so that it returns: the test
// then fails on the time it took instead of hanging. (Opened read-write, a FIFO counts as both
// ends: that releases a reader or a writer blocked in open().)
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace xccl::testing {

// Seconds `read` (which reads or writes `fifo`) took; past `boundSeconds` the other end opens
// `fifo` (every 100 ms until `read` returns) to release a call blocked in open().
inline double secondsReadingFifo(const std::string& fifo, const std::function<void()>& read,
                                 double boundSeconds = 5.0) {
  std::mutex mutex;
  std::condition_variable done;
  bool finished = false;
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mutex);
    auto wait = std::chrono::duration<double>(boundSeconds);
    while (!done.wait_for(lock, wait, [&] { return finished; })) {
      const int fd = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0) ::close(fd);
      wait = std::chrono::milliseconds(100);
    }
  });
  const auto start = std::chrono::steady_clock::now();
  std::exception_ptr thrown;
  try {
    read();
  } catch (...) {
    thrown = std::current_exception();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  {
    std::lock_guard<std::mutex> lock(mutex);
    finished = true;
  }
  done.notify_all();
  watchdog.join();
  if (thrown) std::rethrow_exception(thrown);
  return seconds;
}

}  // namespace xccl::testing
