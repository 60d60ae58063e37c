// Pinning of progress threads (common/thread_affinity.h). Environment cases run in a forked
// child: XCCL_* values are cached for the life of a process.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <thread>

#include "common/thread_affinity.h"

namespace xccl::affinity {
namespace {

// Runs `check` in a child with XCCL_PIN_PROGRESS=value; true when it returned true. A throw or
// a crash in the child counts as false.
bool inChildWithPinSetting(const char* value, const std::function<bool()>& check) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("XCCL_PIN_PROGRESS", value, 1);
    bool ok = false;
    try {
      ok = check();
    } catch (...) {
    }
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// In a child with XCCL_PIN_PROGRESS=value: whether a new thread asking to be pinned to the last
// allowed CPU reports being pinned, and whether it then sees exactly `expected` (that CPU when
// pinned, every allowed CPU when left alone).
bool pinsNewThread(const char* value, bool expectPinned) {
  const std::vector<int> allowed = allowedCpus();
  const std::vector<int> expected = expectPinned ? std::vector<int>{allowed.back()} : allowed;
  return inChildWithPinSetting(value, [&] {
    bool pinned = !expectPinned;
    std::vector<int> inside;
    std::thread([&] {
      pinned = pinProgressThread({allowed.back()}, "test");
      inside = allowedCpus();
    }).join();
    return pinned == expectPinned && inside == expected && allowedCpus() == allowed;
  });
}

TEST(ThreadAffinity, FormatsCpuLists) {
  EXPECT_EQ(formatCpuList({3, 1, 2, 8, 11, 10, 10}), "1-3,8,10-11");
  EXPECT_EQ(formatCpuList({5}), "5");
  EXPECT_EQ(formatCpuList({}), "");
}

TEST(ThreadAffinity, ProgressThreadIsPinnedByDefault) {
  ASSERT_FALSE(allowedCpus().empty());
  EXPECT_TRUE(pinsNewThread("1", true));
}

TEST(ThreadAffinity, PinProgressZeroLeavesTheThreadAlone) {
  EXPECT_TRUE(pinsNewThread("0", false));
}

// "Pinning never throws": a malformed setting is a warning, and the thread runs unpinned.
TEST(ThreadAffinity, BadPinSettingNeverThrows) { EXPECT_TRUE(pinsNewThread("sometimes", false)); }

TEST(ThreadAffinity, EmptyOrForeignCpusLeaveTheThreadAlone) {
  const std::vector<int> allowed = allowedCpus();
  bool pinnedEmpty = true;
  bool pinnedForeign = true;
  std::vector<int> inside;
  std::thread([&] {
    pinnedEmpty = pinProgressThread({}, "test");
    pinnedForeign = pinCurrentThread({7999});
    inside = allowedCpus();
  }).join();
  EXPECT_FALSE(pinnedEmpty);
  EXPECT_FALSE(pinnedForeign);
  EXPECT_EQ(inside, allowed);
}

}  // namespace
}  // namespace xccl::affinity
