// What the GPU side (gpu_path.cc and its parts) does with the planner's decisions (algo/gpu_plan.h
// decides; the grid cap and the all_to_all kernel rule are there too), in pure functions that need
// neither CUDA nor torch, unit-tested on CPU (tests/cpp/backend).
//
// Each one feeds a choice that must be identical on every rank of a group (the grid of a kernel,
// the route of a call), orders a group's calls across its three routes, or decides what a failed
// call, a wait or a shutdown concludes; keeping them here keeps them out of the code that talks
// to streams, where no CPU test can reach them (the templates take the streams' parts as fakes).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "algo/gpu_plan.h"
#include "common/error.h"
#include "kernels/device_handle.h"
#include "kernels/launch.h"
#include "kernels/launch_checks.h"

namespace xccl::backend::rules {

// ---- The plan's all-reduce kernel as the launcher's algorithm ----
//
// algo's plan names kernels without including them (the layers' rule); the backend maps.
inline kernels::Algorithm allReduceAlgorithm(algo::GpuKernel kernel) {
  if (kernel == algo::GpuKernel::kOneShotAllReduce) return kernels::Algorithm::kOneShot;
  if (kernel == algo::GpuKernel::kTwoShotAllReduce) return kernels::Algorithm::kTwoShot;
  XCCL_THROW(ErrorKind::kInvalidArgument, algo::gpuKernelName(kernel),
             " is not an all-reduce kernel");
}

// ---- Issue order across routes ----
//
// ProcessGroupNCCL runs a group's collectives on one NCCL stream, each after the caller's
// current stream at issue: they take effect in issue order. xccl has three routes (kernel on the
// comm stream, vendor on NCCL's stream, host through host memory); before each call, the steps
// below make it start after the group's previous call, whatever route that took.
enum class Route : uint8_t { kKernel, kVendor, kHost };

struct OrderSteps {
  // The comm stream follows the pending vendor Work (through the caller's stream, which waits).
  bool commWaitsVendor = false;
  bool currentWaitsKernel = false;  // caller's stream waits on the last kernel-route event
  bool currentWaitsVendor = false;  // caller's stream waits on the pending vendor Work
};

// `kernelPending`: a kernel-route call's event may not have completed; `vendorPending`: a vendor
// call ran after the last kernel-route call and the comm stream has not waited on it.
inline OrderSteps orderBefore(Route next, bool kernelPending, bool vendorPending) {
  OrderSteps steps;
  switch (next) {
    case Route::kKernel:
      // The comm stream already follows every earlier kernel call and waits on the caller.
      steps.commWaitsVendor = vendorPending;
      break;
    case Route::kVendor:
      // NCCL's stream waits on the caller's stream at issue, and follows earlier vendor calls.
      steps.currentWaitsKernel = kernelPending;
      break;
    case Route::kHost:
      // The host copies wait for the caller's stream: make it follow both other routes.
      steps.currentWaitsKernel = kernelPending;
      steps.currentWaitsVendor = vendorPending;
      break;
  }
  return steps;
}

// The vendor Works the comm stream has not waited on yet. NCCL runs a group's collectives on one
// stream and each pair's point-to-point calls on another, so the last vendor Work does not stand
// for the earlier ones: the next kernel-route call follows every one of them.
template <typename WorkPtr>
class PendingVendor {
 public:
  bool empty() const { return works_.empty(); }
  const std::vector<WorkPtr>& all() const { return works_; }
  void add(WorkPtr work) { works_.push_back(std::move(work)); }
  // Drops the Works `done` reports complete (eager ones only: captured ones cannot be queried),
  // so that a run of vendor calls without a kernel call keeps only what is still running.
  template <typename Done>
  void prune(Done&& done) {
    works_.erase(std::remove_if(works_.begin(), works_.end(), done), works_.end());
  }
  // Every pending Work, oldest first; none is pending afterwards.
  std::vector<WorkPtr> takeAll() { return std::exchange(works_, {}); }
  void clear() { works_.clear(); }

 private:
  std::vector<WorkPtr> works_;
};

// ---- One kernel-route call's failure ----
//
// Runs `body` (the call's copies and launches); on any exception, xccl's, torch's or the
// runtime's, runs `onFailure` (fail the group, track what was queued) and rethrows it unchanged.
// `onFailure` must not throw.
template <typename Body, typename OnFailure>
void failOnThrow(Body&& body, OnFailure&& onFailure) {
  try {
    body();
  } catch (...) {
    onFailure();
    throw;
  }
}

// ---- A blocking wait on one call ----
enum class WaitOutcome : uint8_t { kDone, kFailed, kTimedOut };

// `timeout`: the caller's, or none (c10d's kNoTimeout: the group's timeout bounds the wait, as
// with ProcessGroupNCCL's blocking wait). `completed(bound)`: whether the call's completion event
// completed within `bound`; `failed()`: whether the group's error word is set. The word is read
// after the completion: a failure during the call (a kernel timed out, a peer died) is set only
// by then, and the call's output must not be handed out as good before that is known.
template <typename Completed, typename Failed>
WaitOutcome awaitCall(std::optional<std::chrono::milliseconds> timeout,
                      std::chrono::milliseconds groupTimeout, Completed&& completed,
                      Failed&& failed) {
  if (failed()) return WaitOutcome::kFailed;
  if (!completed(timeout.value_or(groupTimeout))) {
    return failed() ? WaitOutcome::kFailed : WaitOutcome::kTimedOut;
  }
  return failed() ? WaitOutcome::kFailed : WaitOutcome::kDone;
}

// ---- The watchdog (gpu_watchdog.h) ----
//
// Its verdict on the oldest outstanding kernel-route call. The error word is the group's, not the
// call's: a word set while the call was not seen completed fails the call, whichever call set
// it, so that no output is handed out as good once the group failed (a call that did complete
// before a later one failed may be reported failed too, never the reverse).
enum class CallVerdict : uint8_t { kRunning, kDone, kFailed, kTimedOut };

inline CallVerdict judgeCall(bool completed, uint32_t word, std::chrono::milliseconds ran,
                             std::chrono::milliseconds timeout) {
  if (word != 0) return CallVerdict::kFailed;
  if (completed) return CallVerdict::kDone;
  return ran >= timeout ? CallVerdict::kTimedOut : CallVerdict::kRunning;
}

// The outstanding calls in comm-stream order (the first not completed holds the rest back), as
// the watchdog settles them. Not thread-safe: the watchdog guards it.
template <typename Call>
class WatchList {
 public:
  // False once a call failed: the new call is not listed, its caller settles it failed at once.
  bool add(Call call) {
    if (failed_) return false;
    calls_.push_back(std::move(call));
    return true;
  }
  bool empty() const { return calls_.empty(); }
  bool failed() const { return failed_; }
  const Call& oldest() const { return calls_.front(); }
  // What `verdict` on oldest() settles: nothing (running), the oldest alone (done), or it and
  // every later one (failed, timed out), after which the list takes no call any more.
  std::deque<Call> settle(CallVerdict verdict) {
    std::deque<Call> settled;
    if (verdict == CallVerdict::kRunning || calls_.empty()) return settled;
    if (verdict == CallVerdict::kDone) {
      settled.push_back(std::move(calls_.front()));
      calls_.pop_front();
      return settled;
    }
    failed_ = true;
    return std::exchange(calls_, {});
  }

 private:
  std::deque<Call> calls_;
  bool failed_ = false;
};

// Whether wait() blocks the host: with the caller's timeout, or without one under
// XCCL_GPU_BLOCKING_WAIT=1 (`blockingWait`), for a call that can fail after its issue (a
// kernel-route call). Otherwise it only joins the caller's stream, as ProcessGroupNCCL's does.
inline bool waitBlocksHost(bool blockingWait, bool callerTimeout, bool canFailAfterIssue) {
  return callerTimeout || (blockingWait && canFailAfterIssue);
}

// ---- Shutdown ----
//
// A rank whose kernels drained posts "done" and waits for every rank's before freeing its
// workspace (peers may still read it). In a broken group (a kernel failed, the drain had to abort,
// a peer failed) a rank may never post (a dead one): it posts and looks once instead of waiting
// out the deadline, and keeps its workspace unless every rank had posted already.
inline std::chrono::milliseconds doneAgreementWait(bool groupBroken,
                                                   std::chrono::milliseconds left) {
  constexpr std::chrono::milliseconds kLookOnce{1};
  return groupBroken ? kLookOnce : std::max(kLookOnce, left);
}

// ---- Event queries beside a graph capture ----
//
// An event query is one of the calls CUDA deems potentially unsafe during stream capture. In the
// default (global) capture mode a thread that makes one while any thread captures in global mode
// (torch.cuda.graph's default) is refused (cudaErrorStreamCaptureUnsupported) and that capture is
// invalidated: the watchdog, polling its calls from its own thread, would break a graph the user
// captures meanwhile and fail the group for a call that ran fine; wait() and is_completed() may
// also run on a thread other than the capturing one. In the thread-local mode only the thread's
// own capture refuses it. So every query runs with the thread's mode set to thread-local and
// restored after, as ProcessGroupNCCL's watchdog does around its event queries. A thread in the
// relaxed mode keeps it (never stricter than the caller chose).
//
// `Modes` is the runtime's part (a fake in tests/cpp/backend): a type Mode, the constants
// kThreadLocal and kRelaxed, and static void exchange(Mode*), which swaps this thread's mode
// (XCCL_RT(ThreadExchangeStreamCaptureMode)) and throws on a runtime error.
template <typename Modes, typename Query>
auto queryBesideCapture(const Query& query) -> decltype(query()) {
  typename Modes::Mode previous = Modes::kThreadLocal;
  Modes::exchange(&previous);
  if (previous == Modes::kRelaxed) {
    Modes::exchange(&previous);  // relaxed again
    return query();
  }
  struct Restore {
    typename Modes::Mode mode;
    ~Restore() {
      try {
        Modes::exchange(&mode);
      } catch (...) {  // the runtime is unloading: no capture left to protect
      }
    }
  } restore{previous};
  return query();
}

// ---- The group's error word ----
//
// The host sets kernels::kErrorAborted in the mapped word (abort(), shutdown with work still
// running); the kernels treat any non-zero word as fatal, so spinning blocks return at their next
// poll (kernels/device_handle.h).
constexpr uint32_t kErrorAborted = kernels::kErrorAborted;

// "" for a healthy word; otherwise what failed, for DistBackendError texts.
inline std::string describeErrorWord(uint32_t word) {
  return word == 0 ? std::string() : kernels::describeDeviceError(word);
}

}  // namespace xccl::backend::rules
