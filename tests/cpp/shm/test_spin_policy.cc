// The shared-memory waiter's spin policy (net/regions/shm/spin_policy.h): no core counts as free
// when the ranks outnumber the usable CPUs, when a task waits for a core, or after this thread was
// preempted; a peer runs while its stamp is fresh, and no hostile stamp reads as running; a budget
// that follows the measured wake-up cost within its bounds; hostile samples ignored; with more
// ranks than CPUs a yield only while no other task waits and not after a long one; no spin at
// all with XCCL_SHM_SPIN=short. The host is faked through SpinPolicy::Host, so each case is exact.
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
  const auto now = SpinPolicy::Clock::now();
  // Not even for a running peer: it would take a core from a third rank with work.
  EXPECT_EQ(policy.begin(now).count(), 0);
  EXPECT_FALSE(policy.coreIsFree(now));
  EXPECT_TRUE(SpinPolicy(2, 2, fakeHost()).eligible());
}

TEST_F(SpinPolicyTest, NoLongSpinWhenLoadavgCannotBeRead) {
  SpinPolicy::Host host = fakeHost();
  host.runnableTasks = [] { return -1; };
  SpinPolicy policy(2, 2, host);
  EXPECT_FALSE(policy.eligible());
  EXPECT_EQ(policy.begin(SpinPolicy::Clock::now()).count(), 0);
}

TEST_F(SpinPolicyTest, ShortMeansNoSpinPastTheShortSpin) {
  SpinPolicy policy(2, 2, fakeHost(), /*enabled=*/false);
  EXPECT_EQ(policy.begin(SpinPolicy::Clock::now()).count(), 0);
}

TEST_F(SpinPolicyTest, BudgetFollowsTheWakeCostWithinItsBounds) {
  SpinPolicy policy(2, 2, fakeHost());
  const auto now = SpinPolicy::Clock::now();
  EXPECT_EQ(policy.begin(now), SpinPolicy::kInitialWakeCost * SpinPolicy::kBudgetPerWakeCost);
  for (int i = 0; i < 200; ++i) policy.recordWakeCost(1ms);
  EXPECT_EQ(policy.begin(now), SpinPolicy::kMaxBudget);
  for (int i = 0; i < 200; ++i) policy.recordWakeCost(1us);
  EXPECT_EQ(policy.begin(now), SpinPolicy::kMinBudget);
  for (int i = 0; i < 200; ++i) policy.recordWakeCost(30us);
  const auto budget = policy.begin(now);
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

TEST_F(SpinPolicyTest, NoCoreIsFreeWhileATaskWaitsForOne) {
  SpinPolicy policy(2, 2, fakeHost());
  gRunnable = 3;  // two ranks and a busy process on two cores
  auto now = SpinPolicy::Clock::now();
  EXPECT_GT(policy.begin(now).count(), 0);  // the budget, for a running peer
  EXPECT_FALSE(policy.coreIsFree(now));
  gRunnable = 2;
  EXPECT_FALSE(policy.coreIsFree(now + SpinPolicy::kRecheck));  // not again in this spin
  now += 2 * SpinPolicy::kRecheck;
  policy.begin(now);
  EXPECT_TRUE(policy.coreIsFree(now));
  // A spin looks again after kRecheck: a task now waiting ends it.
  gRunnable = 4;
  EXPECT_TRUE(policy.coreIsFree(now + SpinPolicy::kRecheck / 2));  // not re-read yet
  EXPECT_FALSE(policy.coreIsFree(now + SpinPolicy::kRecheck));
}

TEST_F(SpinPolicyTest, APreemptionEndsTheFreeCoreForAWhile) {
  SpinPolicy policy(2, 2, fakeHost());
  const auto now = SpinPolicy::Clock::now();
  policy.begin(now);
  EXPECT_TRUE(policy.coreIsFree(now + SpinPolicy::kRecheck));
  ++gPreemptions;  // the kernel took the core from the spinner: someone else wanted it
  const auto seen = now + 2 * SpinPolicy::kRecheck;
  EXPECT_FALSE(policy.coreIsFree(seen));
  policy.begin(seen + SpinPolicy::kCooldown / 2);
  EXPECT_FALSE(policy.coreIsFree(seen + SpinPolicy::kCooldown / 2));
  policy.begin(seen + SpinPolicy::kCooldown);
  EXPECT_TRUE(policy.coreIsFree(seen + SpinPolicy::kCooldown));
}

TEST_F(SpinPolicyTest, YieldOnlyWithMoreRanksThanCpusAndNoOtherTaskWaiting) {
  const auto now = SpinPolicy::Clock::now();
  gRunnable = 4;
  EXPECT_EQ(SpinPolicy(2, 2, fakeHost()).beginYield(now, 0).count(), 0);  // ranks fit: spin
  EXPECT_EQ(SpinPolicy(4, 2, fakeHost(), /*enabled=*/false).beginYield(now, 0).count(), 0);
  SpinPolicy policy(4, 2, fakeHost());
  EXPECT_GT(policy.beginYield(now, 0).count(), 0);  // 4 ranks runnable on 2 cores, nobody else
  // One rank asleep leaves 3 of the job's tasks runnable: a fourth is somebody else's.
  EXPECT_EQ(policy.beginYield(now, 1).count(), 0);
  gRunnable = 3;
  EXPECT_GT(policy.beginYield(now, 1).count(), 0);
  gRunnable = 5;  // a busy process beside the 4 ranks
  EXPECT_EQ(policy.beginYield(now, 0).count(), 0);
  // Hostile sleeper counts are clamped: never a negative allowance, never more than the ranks.
  gRunnable = 4;
  EXPECT_GT(policy.beginYield(now, -7).count(), 0);
  gRunnable = 0;
  EXPECT_GT(policy.beginYield(now, 1 << 30).count(), 0);
  gRunnable = 1;
  EXPECT_EQ(policy.beginYield(now, 1 << 30).count(), 0);
}

TEST_F(SpinPolicyTest, AYieldRechecksAndALongOneStopsYieldingForAWhile) {
  SpinPolicy policy(4, 2, fakeHost());
  gRunnable = 4;
  const auto now = SpinPolicy::Clock::now();
  ASSERT_GT(policy.beginYield(now, 0).count(), 0);
  EXPECT_FALSE(policy.yieldRecheckDue(now + SpinPolicy::kRecheck / 2));
  EXPECT_TRUE(policy.yieldRecheckDue(now + SpinPolicy::kRecheck));
  EXPECT_TRUE(policy.mayYieldOn(now, now + SpinPolicy::kRecheck, 0));
  gRunnable = 5;
  EXPECT_FALSE(policy.mayYieldOn(now, now + SpinPolicy::kRecheck, 0));
  gRunnable = 4;
  // Off the core for longer than kLongYield: the core went to somebody else's process.
  const auto back = now + SpinPolicy::kLongYield + 1us;
  EXPECT_FALSE(policy.mayYieldOn(now, back, 0));
  EXPECT_EQ(policy.beginYield(back + SpinPolicy::kCooldown / 2, 0).count(), 0);
  EXPECT_GT(policy.beginYield(back + SpinPolicy::kCooldown, 0).count(), 0);
}

TEST(SpinPolicyRunning, AFreshStampIsARunningPeer) {
  const int64_t fresh = SpinPolicy::kRunningFresh.count();
  const int64_t now = 1'000'000'000;
  EXPECT_TRUE(SpinPolicy::running(now, now));
  EXPECT_TRUE(SpinPolicy::running(now - fresh, now));
  EXPECT_FALSE(SpinPolicy::running(now - fresh - 1, now));
  // Stamped after this thread read its clock: running; far in the future: a hostile word.
  EXPECT_TRUE(SpinPolicy::running(now + fresh, now));
  EXPECT_FALSE(SpinPolicy::running(now + fresh + 1, now));
  EXPECT_FALSE(SpinPolicy::running(0, now));  // never stamped
  EXPECT_FALSE(SpinPolicy::running(0, fresh / 2));
}

TEST(SpinPolicyRunning, NoHostileStampReadsAsRunning) {
  const int64_t now = 1'000'000'000;
  for (int64_t stamp : {INT64_MIN, INT64_MIN + 1, int64_t{-1}, INT64_MAX, INT64_MAX - 1}) {
    EXPECT_FALSE(SpinPolicy::running(stamp, now)) << stamp;
  }
  // Distances that overflow an int64.
  EXPECT_FALSE(SpinPolicy::running(INT64_MAX, INT64_MIN));
  EXPECT_FALSE(SpinPolicy::running(INT64_MIN, INT64_MAX));
  EXPECT_FALSE(SpinPolicy::running(INT64_MIN + 1, 1));
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
