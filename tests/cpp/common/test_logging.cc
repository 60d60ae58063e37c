// Rate-limited log lines (common/logging.h RateLimiter, XCCL_WARN_LIMITED): the first (or the
// first few) are written, then none until the interval passed; the next counts those left out.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "common/logging.h"

namespace xccl {
namespace {

using Ms = std::chrono::milliseconds;

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(RateLimiter, FirstLineThenOnePerIntervalWithTheCountLeftOut) {
  log::RateLimiter limiter(Ms(200));
  uint64_t suppressed = 99;
  EXPECT_TRUE(limiter.allow(&suppressed));
  EXPECT_EQ(suppressed, 0u);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(limiter.allow(&suppressed));
  std::this_thread::sleep_for(Ms(250));
  EXPECT_TRUE(limiter.allow(&suppressed));
  EXPECT_EQ(suppressed, 5u);
  EXPECT_FALSE(limiter.allow(&suppressed));
  EXPECT_EQ(log::suppressedNote(0), "");
  EXPECT_EQ(log::suppressedNote(5), " (5 more like this suppressed)");
}

TEST(RateLimiter, AFloodOfWarningsWritesOneLinePerInterval) {
  log::RateLimiter limiter(Ms(200));
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 1000; ++i) XCCL_WARN_LIMITED(limiter, "test", "stranger ", i);
  std::this_thread::sleep_for(Ms(250));
  XCCL_WARN_LIMITED(limiter, "test", "stranger ", 1000);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count(log, "stranger "), 2u) << log;
  EXPECT_NE(log.find("stranger 0\n"), std::string::npos) << log;
  EXPECT_NE(log.find("stranger 1000 (999 more like this suppressed)"), std::string::npos) << log;
}

TEST(RateLimiter, ABurstIsLetThroughThenCounted) {
  log::RateLimiter limiter(Ms(200), /*burst=*/3);
  uint64_t suppressed = 99;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(limiter.allow(&suppressed)) << i;
    EXPECT_EQ(suppressed, 0u);
  }
  for (int i = 0; i < 7; ++i) EXPECT_FALSE(limiter.allow(&suppressed));
  std::this_thread::sleep_for(Ms(250));
  EXPECT_TRUE(limiter.allow(&suppressed));
  EXPECT_EQ(suppressed, 7u);
  EXPECT_TRUE(limiter.allow(&suppressed));
  EXPECT_EQ(suppressed, 0u);
}

TEST(RateLimiter, ThreadsShareOneBudget) {
  log::RateLimiter limiter(Ms(60000));
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      uint64_t suppressed;
      for (int i = 0; i < 1000; ++i) allowed += limiter.allow(&suppressed) ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(allowed.load(), 1);
}

}  // namespace
}  // namespace xccl
