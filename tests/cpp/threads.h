// GoogleTest helpers shared by every tier: ranks as threads, and which xccl::Error a call threw.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
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

// The message of the kInvalidArgument `fn` throws; a test failure when it throws anything else.
inline std::string invalidArgumentMessage(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "nothing thrown";
  return "";
}

// Set in the fresh process inFreshProcess (below) starts; test-only, never read by xccl.
constexpr const char* kFreshChildMarker = "XCCL_TEST_FRESH_CHILD";

// Whether this process is such a fresh process (for a test that prepares a file in its parent
// only, before inFreshProcess).
inline bool isFreshProcess() { return std::getenv(kFreshChildMarker) != nullptr; }

// For code that caches what it reads from the environment once per process: runs the current
// test again in a fresh process (this binary re-executed with only that test selected), with
// `vars` set and `unset` removed. Returns true in that child, which then runs the checks (its
// gtest exit status carries the outcome); in the parent it waits for the child, fails the test if
// the child did, and returns false.
inline bool inFreshProcess(const std::vector<std::pair<const char*, const char*>>& vars,
                           const std::vector<const char*>& unset = {}) {
  if (isFreshProcess()) return true;
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string filter =
      std::string("--gtest_filter=") + test->test_suite_name() + "." + test->name();
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const auto& [name, value] : vars) ::setenv(name, value, 1);
    for (const char* name : unset) ::unsetenv(name);
    ::setenv(kFreshChildMarker, "1", 1);
    ::execl("/proc/self/exe", "xccl-test", filter.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the checks failed in the fresh process (status " << status << "), see its output above";
  return false;
}

}  // namespace xccl::testing
