// The shared-memory waiter's spin policy (net/regions/shm/spin_policy.h): never a long spin when
// the ranks outnumber the usable CPUs, when a task waits for a core, or after this thread was
// preempted; a budget that follows the measured wake-up cost within its bounds; hostile samples
// ignored. The host is faked through SpinPolicy::Host, so each case is exact.
#include <gtest/gtest.h>

#include <chrono>

#include "net/regions/shm/spin_policy.h"

namespace xccl {
namespace {

using net::shm::SpinPolicy;
using namespace std::chrono_literals;

// The fake host: plain globals, as Host holds function pointers.
int gRunnable = 1;
int gOnline = 2;
long gPreemptions = 0;

SpinPolicy::Host fakeHost() {
  return SpinPolicy::Host{[] { return gRunnable; }, [] { return gOnline; },
                          [] { return gPreemptions; }};
}

class SpinPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gRunnable = 2;
    gOnline = 2;
    gPreemptions = 0;
  }
};

TEST_F(SpinPolicyTest, NoLongSpinWhenRanksOutnumberTheUsableCpus) {
  SpinPolicy policy(4, 2, fakeHost());  // 4 ranks on 2 cores: how the tests run
  EXPECT_FALSE(policy.eligible());
  EXPECT_EQ(policy.budget(SpinPolicy::Clock::now()).count(), 0);
  EXPECT_TRUE(SpinPolicy(2, 2, fakeHost()).eligible());
}

TEST_F(SpinPolicyTest, NoLongSpinWhenLoadavgCannotBeRead) {
  SpinPolicy::Host host = fakeHost();
  host.runnableTasks = [] { return -1; };
  EXPECT_FALSE(SpinPolicy(2, 2, host).eligible());
}

TEST_F(SpinPolicyTest, BudgetFollowsTheWakeCostWithinItsBounds) {
  SpinPolicy policy(2, 2, fakeHost());
  const auto now = SpinPolicy::Clock::now();
  EXPECT_EQ(policy.budget(now), SpinPolicy::kInitialWakeCost * SpinPolicy::kBudgetPerWakeCost);
  for (int i = 0; i < 200; ++i) policy.recordWakeCost(1ms);
  EXPECT_EQ(policy.budget(now), SpinPolicy::kMaxBudget);
  for (int i = 0; i < 200; ++i) policy.recordWakeCost(1us);
  EXPECT_EQ(policy.budget(now), SpinPolicy::kMinBudget);
  for (int i = 0; i < 200; ++i) policy.recordWakeCost(30us);
  const auto budget = policy.budget(now);
  EXPECT_GT(budget, 4 * 29us);
  EXPECT_LT(budget, 4 * 31us);
}

TEST_F(SpinPolicyTest, HostileWakeSamplesAreIgnored) {
  SpinPolicy policy(2, 2, fakeHost());
  const auto before = policy.wakeCost();
  policy.recordWakeCost(std::chrono::nanoseconds(-5));
  policy.recordWakeCost(std::chrono::nanoseconds(INT64_MIN));
  policy.recordWakeCost(std::chrono::nanoseconds(INT64_MAX));
  policy.recordWakeCost(2s);
  EXPECT_EQ(policy.wakeCost(), before);
}

TEST_F(SpinPolicyTest, NoLongSpinWhileATaskWaitsForACore) {
  SpinPolicy policy(2, 2, fakeHost());
  gRunnable = 3;  // two ranks and a busy process on two cores
  EXPECT_EQ(policy.budget(SpinPolicy::Clock::now()).count(), 0);
  gRunnable = 2;
  auto now = SpinPolicy::Clock::now();
  EXPECT_GT(policy.budget(now).count(), 0);
  // A spin looks again after kRecheck: a task now waiting ends it.
  EXPECT_TRUE(policy.mayGoOn(now + SpinPolicy::kRecheck / 2));
  gRunnable = 4;
  EXPECT_TRUE(policy.mayGoOn(now + SpinPolicy::kRecheck / 2));  // not re-read yet
  EXPECT_FALSE(policy.mayGoOn(now + SpinPolicy::kRecheck));
}

TEST_F(SpinPolicyTest, APreemptionStopsTheSpinAndLongSpinsForAWhile) {
  SpinPolicy policy(2, 2, fakeHost());
  const auto now = SpinPolicy::Clock::now();
  EXPECT_GT(policy.budget(now).count(), 0);
  EXPECT_TRUE(policy.mayGoOn(now + SpinPolicy::kRecheck));
  ++gPreemptions;  // the kernel took the core from the spinner: someone else wanted it
  const auto seen = now + 2 * SpinPolicy::kRecheck;
  EXPECT_FALSE(policy.mayGoOn(seen));
  EXPECT_EQ(policy.budget(seen + SpinPolicy::kCooldown / 2).count(), 0);
  EXPECT_GT(policy.budget(seen + SpinPolicy::kCooldown).count(), 0);
}

TEST(SpinPolicyHost, ParsesLoadavgLinesAndRefusesOthers) {
  EXPECT_EQ(SpinPolicy::runnableIn("0.52 0.58 0.59 3/512 12345\n"), 3);
  EXPECT_EQ(SpinPolicy::runnableIn("10.00 9.00 8.00 123/4567 1"), 123);
  EXPECT_EQ(SpinPolicy::runnableIn(""), -1);
  EXPECT_EQ(SpinPolicy::runnableIn("0.52 0.58 0.59"), -1);
  EXPECT_EQ(SpinPolicy::runnableIn("0.52 0.58 0.59 x/512 1"), -1);
  EXPECT_EQ(SpinPolicy::runnableIn("0.52 0.58 0.59 3 512"), -1);
  // Ten digits would overflow an int: refused, not wrapped.
  EXPECT_EQ(SpinPolicy::runnableIn("0 0 0 9999999999/1 1"), -1);
}

TEST(SpinPolicyHost, ReadsThisHost) {
  // This thread is running, so the kernel counts at least one runnable task.
  EXPECT_GE(SpinPolicy::runnableTasks(), 1);
  EXPECT_GE(SpinPolicy::onlineCpus(), 1);
  EXPECT_GE(SpinPolicy::usableCpus(), 1);
  EXPECT_LE(SpinPolicy::usableCpus(), SpinPolicy::onlineCpus());
  EXPECT_GE(SpinPolicy::preemptions(), 0);
}

}  // namespace
}  // namespace xccl
