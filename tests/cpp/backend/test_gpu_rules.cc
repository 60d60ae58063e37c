// The GPU side's decisions that every rank must take alike (csrc/backend/gpu/gpu_rules.h); the
// grid cap and the all_to_all kernel rule are the planner's (tests/cpp/algo/test_gpu_grid.cc).
#include "backend/gpu/gpu_rules.h"

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace xccl::backend::rules {
namespace {

TEST(AllReduceAlgorithm, MapsThePlansAllReduceKernels) {
  EXPECT_EQ(allReduceAlgorithm(algo::GpuKernel::kOneShotAllReduce), kernels::Algorithm::kOneShot);
  EXPECT_EQ(allReduceAlgorithm(algo::GpuKernel::kTwoShotAllReduce), kernels::Algorithm::kTwoShot);
  EXPECT_THROW(allReduceAlgorithm(algo::GpuKernel::kBroadcast), Error);
}

TEST(OrderBefore, EachRouteFollowsTheOthers) {
  // Kernel after vendor: the comm stream must wait on NCCL's work.
  EXPECT_TRUE(orderBefore(Route::kKernel, false, true).commWaitsVendor);
  EXPECT_FALSE(orderBefore(Route::kKernel, true, false).commWaitsVendor);
  EXPECT_FALSE(orderBefore(Route::kKernel, true, true).currentWaitsKernel);
  // Vendor after kernel: the caller's stream (which NCCL's stream waits on) waits on the kernel.
  EXPECT_TRUE(orderBefore(Route::kVendor, true, false).currentWaitsKernel);
  EXPECT_FALSE(orderBefore(Route::kVendor, false, true).currentWaitsKernel);
  EXPECT_FALSE(orderBefore(Route::kVendor, true, true).commWaitsVendor);
  // Host after either: the caller's stream, which the host copies synchronise, waits on both.
  const OrderSteps host = orderBefore(Route::kHost, true, true);
  EXPECT_TRUE(host.currentWaitsKernel);
  EXPECT_TRUE(host.currentWaitsVendor);
  const OrderSteps idle = orderBefore(Route::kHost, false, false);
  EXPECT_FALSE(idle.currentWaitsKernel || idle.currentWaitsVendor || idle.commWaitsVendor);
}

TEST(DescribeErrorWord, NamesAbortAndPeers) {
  EXPECT_EQ(describeErrorWord(0), "");
  EXPECT_NE(describeErrorWord(kErrorAborted).find("aborted"), std::string::npos);
  const std::string both = describeErrorWord(kErrorAborted | kernels::kErrorTimeout | 2u);
  EXPECT_NE(both.find("aborted"), std::string::npos);
  EXPECT_NE(both.find(kernels::describeDeviceError(kernels::kErrorTimeout | 2u)),
            std::string::npos);
  EXPECT_EQ(describeErrorWord(kernels::kErrorTimeout | 1u),
            kernels::describeDeviceError(kernels::kErrorTimeout | 1u));
}

// Vendor collective, then vendor point-to-point (another NCCL stream), then a kernel-route call:
// the kernel call must follow both, not only the last.
TEST(PendingVendor, AKernelCallFollowsEveryVendorWorkSinceTheLast) {
  PendingVendor<std::string> pending;
  EXPECT_TRUE(pending.empty());
  pending.add("all_reduce on the collective stream");
  pending.add("send on the pair's stream");
  EXPECT_TRUE(orderBefore(Route::kKernel, false, !pending.empty()).commWaitsVendor);
  const std::vector<std::string> waited = pending.takeAll();
  ASSERT_EQ(waited.size(), 2u);
  EXPECT_EQ(waited[0], "all_reduce on the collective stream");
  EXPECT_EQ(waited[1], "send on the pair's stream");
  EXPECT_TRUE(pending.empty());
}

TEST(PendingVendor, CompletedWorksAreDroppedTheRunningOnesKept) {
  PendingVendor<int> pending;
  for (int i = 0; i < 5; ++i) pending.add(i);
  pending.prune([](int w) { return w % 2 == 0; });  // 0, 2, 4 completed
  EXPECT_EQ(pending.all(), (std::vector<int>{1, 3}));
  pending.clear();
  EXPECT_TRUE(pending.empty());
}

// A call's body can fail with xccl's Error (a runtime call), torch's (DistBackendError, c10::Error)
// or the library's (bad_alloc): the group must be failed (and the queued chunks tracked) whatever
// the exception's type, and the exception reach the caller unchanged.
TEST(FailOnThrow, AnyExceptionFailsTheCallAndPassesThrough) {
  int failures = 0;
  const auto fail = [&] { ++failures; };
  EXPECT_THROW(failOnThrow([] { throw std::runtime_error("not xccl's"); }, fail),
               std::runtime_error);
  EXPECT_EQ(failures, 1);
  EXPECT_THROW(failOnThrow([] { XCCL_THROW(ErrorKind::kSystem, "copy"); }, fail), Error);
  EXPECT_EQ(failures, 2);
  EXPECT_THROW(failOnThrow([] { throw 7; }, fail), int);
  EXPECT_EQ(failures, 3);
  failOnThrow([] {}, fail);
  EXPECT_EQ(failures, 3);
}

// A kernel that times out sets the error word while it runs, after wait() was called: wait()
// without a timeout must see it (stale output is never handed out as good).
TEST(AwaitCall, AFailureWhileTheCallRunsIsItsWaitsFailure) {
  using std::chrono::milliseconds;
  bool word = false;
  milliseconds bound{0};
  const auto failed = [&] { return word; };
  const auto failsWhileRunning = [&](milliseconds within) {
    bound = within;
    word = true;  // the kernel timed out on the device
    return true;  // its event completed (the kernel returned)
  };
  EXPECT_EQ(awaitCall(std::nullopt, milliseconds(30000), failsWhileRunning, failed),
            WaitOutcome::kFailed);
  EXPECT_EQ(bound, milliseconds(30000));  // no timeout: the group's bounds it
  word = false;
  EXPECT_EQ(awaitCall(milliseconds(5), milliseconds(30000), failsWhileRunning, failed),
            WaitOutcome::kFailed);
  EXPECT_EQ(bound, milliseconds(5));
}

TEST(AwaitCall, DoneTimedOutAndAlreadyFailed) {
  using std::chrono::milliseconds;
  bool word = false;
  int polls = 0;
  const auto failed = [&] { return word; };
  const auto completes = [&](milliseconds) { return ++polls, true; };
  const auto runs = [&](milliseconds) { return ++polls, false; };
  EXPECT_EQ(awaitCall(std::nullopt, milliseconds(10), completes, failed), WaitOutcome::kDone);
  EXPECT_EQ(awaitCall(milliseconds(1), milliseconds(10), runs, failed), WaitOutcome::kTimedOut);
  word = true;  // a peer's failure explains a stuck call better than the timeout
  EXPECT_EQ(awaitCall(milliseconds(1), milliseconds(10), runs, failed), WaitOutcome::kFailed);
  polls = 0;
  EXPECT_EQ(awaitCall(std::nullopt, milliseconds(10), completes, failed), WaitOutcome::kFailed);
  EXPECT_EQ(polls, 0);  // failed already: no wait
}

// A peer died mid-kernel: the "done" agreement at shutdown must not wait for it (the whole
// deadline); a healthy group waits for every rank as long as the deadline allows.
TEST(DoneAgreementWait, ABrokenGroupLooksOnceAHealthyOneWaits) {
  using std::chrono::milliseconds;
  EXPECT_EQ(doneAgreementWait(false, milliseconds(25000)), milliseconds(25000));
  EXPECT_EQ(doneAgreementWait(false, milliseconds(-3)), milliseconds(1));
  EXPECT_LE(doneAgreementWait(true, milliseconds(25000)), milliseconds(1));
  EXPECT_LE(doneAgreementWait(true, milliseconds(0)), milliseconds(1));
}

// ---- The watchdog (gpu_watchdog.h) ----

TEST(JudgeCall, ASetWordFailsTheCallWhetherItCompletedOrNot) {
  using std::chrono::milliseconds;
  const milliseconds timeout{1000};
  EXPECT_EQ(judgeCall(false, 0, milliseconds(5), timeout), CallVerdict::kRunning);
  EXPECT_EQ(judgeCall(true, 0, milliseconds(5), timeout), CallVerdict::kDone);
  // A kernel that timed out on the device returns (its event completes) with the word set: its
  // output is stale, never done.
  EXPECT_EQ(judgeCall(true, kernels::kErrorTimeout | 1u, milliseconds(5), timeout),
            CallVerdict::kFailed);
  EXPECT_EQ(judgeCall(false, kErrorAborted, milliseconds(5), timeout), CallVerdict::kFailed);
  // Stuck past the group timeout (e.g. behind the caller's stream): the watchdog's timeout.
  EXPECT_EQ(judgeCall(false, 0, timeout, timeout), CallVerdict::kTimedOut);
  EXPECT_EQ(judgeCall(true, 0, timeout * 2, timeout), CallVerdict::kDone);
}

TEST(WatchList, DoneSettlesTheOldestAloneAFailureEveryOutstandingCall) {
  WatchList<std::string> calls;
  EXPECT_TRUE(calls.add("allreduce 1"));
  EXPECT_TRUE(calls.add("allreduce 2"));
  EXPECT_TRUE(calls.add("broadcast 3"));
  EXPECT_TRUE(calls.settle(CallVerdict::kRunning).empty());
  EXPECT_EQ(calls.settle(CallVerdict::kDone), (std::deque<std::string>{"allreduce 1"}));
  EXPECT_EQ(calls.oldest(), "allreduce 2");
  EXPECT_FALSE(calls.failed());
  // The second fails: it and the third (queued behind it on the comm stream) are failed.
  EXPECT_EQ(calls.settle(CallVerdict::kFailed),
            (std::deque<std::string>{"allreduce 2", "broadcast 3"}));
  EXPECT_TRUE(calls.empty());
  EXPECT_TRUE(calls.failed());
  // After a failure no call is watched as if it could succeed: its caller settles it failed.
  EXPECT_FALSE(calls.add("allreduce 4"));
  EXPECT_TRUE(calls.empty());
  WatchList<int> timedOut;
  timedOut.add(1);
  timedOut.add(2);
  EXPECT_EQ(timedOut.settle(CallVerdict::kTimedOut).size(), 2u);
  EXPECT_FALSE(timedOut.add(3));
}

// The watchdog's loop over fakes: calls complete in issue order; the second's kernel times out on
// the device (its event completes, the word is set). Every call's Work is settled, the second
// and the third failed, and nothing after the failure is handed out as good.
TEST(WatchList, AWatchdogLoopSettlesEveryCallAndNoStaleOutputAfterAFailure) {
  using std::chrono::milliseconds;
  struct FakeCall {
    int id;
    bool completed;
    uint32_t wordWhenSeen;  // the word as the watchdog reads it after this call's event
  };
  WatchList<FakeCall> calls;
  calls.add({1, true, 0});
  calls.add({2, true, kernels::kErrorTimeout | 1u});
  calls.add({3, false, kernels::kErrorTimeout | 1u});
  std::vector<std::pair<int, bool>> settled;  // (call, good)
  for (int step = 0; step < 10 && !calls.empty(); ++step) {
    const FakeCall& oldest = calls.oldest();
    const CallVerdict verdict =
        judgeCall(oldest.completed, oldest.wordWhenSeen, milliseconds(1), milliseconds(1000));
    for (const FakeCall& call : calls.settle(verdict)) {
      settled.emplace_back(call.id, verdict == CallVerdict::kDone);
    }
  }
  EXPECT_EQ(settled, (std::vector<std::pair<int, bool>>{{1, true}, {2, false}, {3, false}}));
  EXPECT_FALSE(calls.add({4, true, 0}));
}

// Default (XCCL_GPU_BLOCKING_WAIT=0): wait() without a timeout only joins the caller's stream,
// as ProcessGroupNCCL's; =1 blocks for a call that can fail after its issue; a caller's timeout
// always blocks.
TEST(WaitBlocksHost, OnlyWithATimeoutOrBlockingWaitOnAWatchedCall) {
  EXPECT_FALSE(waitBlocksHost(false, false, true));
  EXPECT_TRUE(waitBlocksHost(true, false, true));
  EXPECT_FALSE(waitBlocksHost(true, false, false));  // host route, world size 1
  EXPECT_TRUE(waitBlocksHost(false, true, true));
  EXPECT_TRUE(waitBlocksHost(false, true, false));
}

// ---- Event queries beside a graph capture ----
//
// A fake runtime that keeps CUDA's rule for potentially unsafe calls during stream capture
// (cudaStreamCaptureMode in the CUDA Runtime API): a thread in the global mode is refused while
// any thread captures in the global mode; one in the thread-local mode only during its own
// capture; one in the relaxed mode never. A refused call invalidates the captures it collided
// with, as the runtime does.
struct FakeCapture {
  enum Mode { kGlobal, kThreadLocal, kRelaxed };
  static inline thread_local Mode threadMode = kGlobal;  // each thread starts global
  static inline thread_local bool capturingHere = false;
  static inline std::atomic<int> globalCaptures{0};
  static inline std::atomic<bool> invalidated{false};
  static inline std::atomic<int> exchanges{0};

  static void exchange(Mode* mode) {
    ++exchanges;
    std::swap(threadMode, *mode);
  }
  static void beginGlobalCapture() {
    capturingHere = true;
    ++globalCaptures;
  }
  static void endCapture() {
    capturingHere = false;
    --globalCaptures;
  }
  // An event query: "ready", or "refused" (and the colliding captures invalidated).
  static std::string eventQuery() {
    const bool othersCapture = globalCaptures.load() > (capturingHere ? 1 : 0);
    const bool refused =
        (threadMode == kGlobal && othersCapture) || (threadMode != kRelaxed && capturingHere);
    if (refused) invalidated = true;
    return refused ? "refused" : "ready";
  }
  static void reset() {
    globalCaptures = 0;
    invalidated = false;
    exchanges = 0;
  }
};

// On a thread of its own (the watchdog's, or a thread calling wait()), while the main thread
// captures in the global mode: the query passes through rules::queryBesideCapture or not at all.
std::pair<std::string, FakeCapture::Mode> queryOnAnotherThread(bool besideCapture,
                                                               FakeCapture::Mode startMode) {
  std::pair<std::string, FakeCapture::Mode> seen;
  std::thread side([&] {
    FakeCapture::threadMode = startMode;
    seen.first = besideCapture ? queryBesideCapture<FakeCapture>(&FakeCapture::eventQuery)
                               : FakeCapture::eventQuery();
    seen.second = FakeCapture::threadMode;
  });
  side.join();
  return seen;
}

TEST(QueryBesideCapture, APlainQueryOnAnotherThreadBreaksAGlobalCapture) {
  // The fake keeps the runtime's rule: this is the defect the guard exists for.
  FakeCapture::reset();
  FakeCapture::beginGlobalCapture();
  EXPECT_EQ(queryOnAnotherThread(false, FakeCapture::kGlobal).first, "refused");
  FakeCapture::endCapture();
  EXPECT_TRUE(FakeCapture::invalidated.load());
}

TEST(QueryBesideCapture, TheWatchdogsQueryLeavesAnotherThreadsCaptureAlone) {
  FakeCapture::reset();
  FakeCapture::beginGlobalCapture();
  const auto [answer, modeAfter] = queryOnAnotherThread(true, FakeCapture::kGlobal);
  FakeCapture::endCapture();
  EXPECT_EQ(answer, "ready");
  EXPECT_FALSE(FakeCapture::invalidated.load());
  EXPECT_EQ(modeAfter, FakeCapture::kGlobal);  // the thread's own mode is back
  EXPECT_EQ(FakeCapture::exchanges.load(), 2);
  // The main thread's mode was never touched.
  EXPECT_EQ(FakeCapture::threadMode, FakeCapture::kGlobal);
}

TEST(QueryBesideCapture, ARelaxedThreadStaysRelaxed) {
  FakeCapture::reset();
  FakeCapture::threadMode = FakeCapture::kRelaxed;
  FakeCapture::beginGlobalCapture();  // its own capture: relaxed lets it query
  FakeCapture::Mode during = FakeCapture::kGlobal;
  EXPECT_EQ(queryBesideCapture<FakeCapture>([&] {
              during = FakeCapture::threadMode;
              return FakeCapture::eventQuery();
            }),
            "ready");
  FakeCapture::endCapture();
  EXPECT_EQ(during, FakeCapture::kRelaxed);
  EXPECT_EQ(FakeCapture::threadMode, FakeCapture::kRelaxed);
  EXPECT_FALSE(FakeCapture::invalidated.load());
  FakeCapture::threadMode = FakeCapture::kGlobal;
}

TEST(QueryBesideCapture, TheModeIsRestoredWhenTheQueryThrows) {
  FakeCapture::reset();
  FakeCapture::Mode during = FakeCapture::kGlobal;
  EXPECT_THROW(queryBesideCapture<FakeCapture>([&]() -> int {
                 during = FakeCapture::threadMode;
                 throw std::runtime_error("cudaErrorLaunchFailure");
               }),
               std::runtime_error);
  EXPECT_EQ(during, FakeCapture::kThreadLocal);
  EXPECT_EQ(FakeCapture::threadMode, FakeCapture::kGlobal);
}

}  // namespace
}  // namespace xccl::backend::rules
