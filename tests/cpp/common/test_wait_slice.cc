// Short scheduler slices for waiting threads (common/wait_slice.h). Each case runs in a fresh
// process: XCCL_WAIT_SLICE_US is read once per process, and whether the kernel honours custom
// slices (Linux 6.12+) is learned once. On a kernel that does not, every case checks instead
// that nothing changed.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

#include "common/wait_slice.h"
#include "threads.h"

namespace xccl::wait_slice {
namespace {

using xccl::testing::inFreshProcess;

int niceOfThisThread() {
  errno = 0;
  return ::getpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)));
}

TEST(WaitSlice, AWaitShortensTheCallersSliceAndGivesItsOwnBack) {
  if (!inFreshProcess({{"XCCL_WAIT_SLICE_US", "200"}})) return;
  const uint64_t own = currentNs();
  {
    const WhileWaiting outer;
    const uint64_t expected = requestedNs() != 0 ? 200'000 : own;  // learned by the first try
    EXPECT_EQ(currentNs(), expected);
    {
      const WhileWaiting inner;  // nested: changes and restores nothing
      EXPECT_EQ(currentNs(), expected);
    }
    EXPECT_EQ(currentNs(), expected) << "the inner wait restored the slice too early";
  }
  EXPECT_EQ(currentNs(), own);
}

TEST(WaitSlice, XcclThreadsKeepTheShortSliceAndTheCallerIsLeftAlone) {
  if (!inFreshProcess({{"XCCL_WAIT_SLICE_US", "300"}})) return;
  const uint64_t own = currentNs();
  uint64_t during = 0, afterWait = 0;
  std::thread worker([&] {
    keepShort();
    during = currentNs();
    {
      const WhileWaiting wait;
    }
    afterWait = currentNs();
  });
  worker.join();
  const uint64_t expected = requestedNs() != 0 ? 300'000 : own;
  EXPECT_EQ(during, expected);
  EXPECT_EQ(afterWait, expected) << "a wait on a short-slice thread gave it a long one";
  EXPECT_EQ(currentNs(), own);
}

TEST(WaitSlice, ZeroLeavesTheSchedulerAlone) {
  if (!inFreshProcess({{"XCCL_WAIT_SLICE_US", "0"}})) return;
  const uint64_t own = currentNs();
  EXPECT_EQ(requestedNs(), 0u);
  {
    const WhileWaiting wait;
    EXPECT_EQ(currentNs(), own);
  }
  uint64_t worker = 0;
  std::thread([&] {
    keepShort();
    worker = currentNs();
  }).join();
  EXPECT_EQ(worker, own);
}

TEST(WaitSlice, BelowTheKernelMinimumReadsAsTheMinimum) {
  if (!inFreshProcess({{"XCCL_WAIT_SLICE_US", "5"}})) return;
  const uint64_t own = currentNs();
  const WhileWaiting wait;
  EXPECT_EQ(currentNs(), requestedNs() != 0 ? 100'000 : own);
}

// sched_setattr sets the nice value with the slice: a wait must not reset a thread's nice.
TEST(WaitSlice, AWaitKeepsTheThreadsNiceValue) {
  if (!inFreshProcess({{"XCCL_WAIT_SLICE_US", "100"}})) return;
  std::thread([] {
    const id_t tid = static_cast<id_t>(::syscall(SYS_gettid));
    ASSERT_EQ(::setpriority(PRIO_PROCESS, tid, 7), 0);
    {
      const WhileWaiting wait;
      EXPECT_EQ(niceOfThisThread(), 7);
    }
    EXPECT_EQ(niceOfThisThread(), 7);
  }).join();
}

TEST(WaitSlice, AnInvalidSettingIsOffNotAThrow) {
  if (!inFreshProcess({{"XCCL_WAIT_SLICE_US", "forever"}})) return;
  const uint64_t own = currentNs();
  EXPECT_NO_THROW(keepShort());
  const WhileWaiting wait;
  EXPECT_EQ(currentNs(), own);
  EXPECT_EQ(requestedNs(), 0u);
}

}  // namespace
}  // namespace xccl::wait_slice
