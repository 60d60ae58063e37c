// GroupCore's abort hooks (csrc/backend/core/abort_hooks.h): each runs at most once, in id order;
// a hook's exception is logged and the others still run; a hook may register another.
#include "backend/core/abort_hooks.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace xccl::backend {
namespace {

TEST(AbortHooks, RunEachHookOnceInIdOrder) {
  AbortHooks hooks;
  std::vector<int> ran;
  for (int id : {3, 1, 2}) hooks.add(id, [&ran, id] { ran.push_back(id); });
  hooks.runOnce();
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
  hooks.runOnce();  // a second failure finds them gone
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
}

TEST(AbortHooks, ARemovedHookDoesNotRunAndAnIdAddedTwiceRunsTheLatest) {
  AbortHooks hooks;
  std::vector<std::string> ran;
  hooks.add(1, [&ran] { ran.push_back("removed"); });
  hooks.add(2, [&ran] { ran.push_back("first"); });
  hooks.add(2, [&ran] { ran.push_back("second"); });
  hooks.remove(1);
  hooks.remove(7);  // never registered: nothing happens
  hooks.runOnce();
  EXPECT_EQ(ran, (std::vector<std::string>{"second"}));
}

TEST(AbortHooks, AHookThatThrowsIsLoggedAndTheOthersStillRun) {
  AbortHooks hooks;
  bool lastRan = false;
  hooks.add(1, [] { throw std::runtime_error("boom"); });
  hooks.add(2, [] { throw 42; });
  hooks.add(3, [&lastRan] { lastRan = true; });
  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(hooks.runOnce());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(lastRan);
  EXPECT_NE(log.find("abort hook 1 raised (ignored): boom"), std::string::npos) << log;
  EXPECT_NE(log.find("abort hook 2 raised a non-standard exception (ignored)"), std::string::npos)
      << log;
}

TEST(AbortHooks, AHookAddedWhileTheyRunWaitsForTheNextRun) {
  AbortHooks hooks;
  int laterRuns = 0;
  // Hooks run outside the lock: registering from inside one must not deadlock.
  hooks.add(1, [&] { hooks.add(2, [&laterRuns] { ++laterRuns; }); });
  hooks.runOnce();
  EXPECT_EQ(laterRuns, 0);
  hooks.runOnce();
  EXPECT_EQ(laterRuns, 1);
  hooks.runOnce();
  EXPECT_EQ(laterRuns, 1);
}

}  // namespace
}  // namespace xccl::backend
