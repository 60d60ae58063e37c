// GoogleTest helpers shared by every tier: ranks as threads, and which xccl::Error a call threw.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"

namespace xccl::testing {

// Runs body(rank) on `size` threads and rethrows the first failure after all of them joined.
inline void runThreads(int size, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::exception_ptr failure;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (...) {
        std::lock_guard<std::mutex> guard(mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

// The kind of the xccl::Error that fn threw; a test failure (and kInternal) when it threw none.
inline ErrorKind errorKindOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& error) {
    return error.kind();
  }
  ADD_FAILURE() << "no xccl::Error thrown";
  return ErrorKind::kInternal;
}

}  // namespace xccl::testing
