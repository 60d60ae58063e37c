#include "backend/gpu/gpu_watchdog.h"
#include "backend/gpu/gpu_stream.h"

#include <algorithm>

#include "backend/core/torch_error.h"
#include "common/logging.h"

namespace xccl::backend {

Watchdog::Watchdog(int device, std::shared_ptr<ErrorWord> error, std::chrono::milliseconds timeout,
                   std::function<void(const std::string&)> onFailure)
    : device_(device),
      error_(std::move(error)),
      timeout_(timeout),
      onFailure_(std::move(onFailure)) {}

Watchdog::~Watchdog() {
  stop();
  // Destroying a stream with work still queued is allowed (the runtime frees it once that work
  // completed), and the futures' events outlive it: one stream per group, not one per group
  // ever made. An error here (the runtime already unloaded at exit) changes nothing.
  if (completionsStream_ != nullptr) {
    GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
    (void)XCCL_RT(StreamDestroy)(completionsStream_);
  }
}

void Watchdog::watch(c10::intrusive_ptr<GpuWork> work, std::shared_ptr<CudaEvent> done,
                     std::string what) {
  Call call{std::move(work), std::move(done), std::move(what), Clock::now()};
  bool listed = false;
  std::string why = "the group failed or shut down before this call could be watched";
  {
    std::lock_guard<std::mutex> guard(mutex_);
    try {
      if (!stopping_ && !thread_.joinable()) start();
      listed = !stopping_ && calls_.add(call);
    } catch (const std::exception& e) {
      why = std::string("the watchdog could not start: ") + e.what();
    }
  }
  if (listed) {
    changed_.notify_one();
    return;
  }
  // Its output is not to be handed out as good: no thread will ever see it complete.
  std::deque<Call> late;
  late.push_back(std::move(call));
  settle(std::move(late), rules::CallVerdict::kFailed, why, /*failGroup=*/true);
}

void Watchdog::start() {
  // The futures' stream: idle but for their events, so a future's consumer waits on its call
  // alone (the call completed before the event is recorded).
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  gpuStream_t stream = nullptr;
  XCCL_GPU_CHECK(ErrorKind::kSystem,
                 XCCL_RT(StreamCreateWithFlags)(&stream, XCCL_RT(StreamNonBlocking)));
  completionsStream_ = stream;
  completions_ = gpuStreamFromExternal(stream, static_cast<c10::DeviceIndex>(device_)).unwrap();
  thread_ = std::thread([this] {
    try {
      run();
    } catch (const std::exception& e) {
      // Never reached in practice (run() settles failures itself); outstanding calls are then
      // settled by nobody: a blocking wait() times out, the next call still sees the word.
      error_->abort();
      XCCL_WARN("backend", "GPU watchdog stopped: ", e.what());
    }
  });
}

void Watchdog::stop() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  changed_.notify_one();
  if (thread_.joinable()) thread_.join();
}

rules::CallVerdict Watchdog::judge(const Call& call, std::string* why) {
  bool completed = false;
  try {
    completed = call.done->query();
  } catch (const std::exception& e) {
    *why = e.what();
    return rules::CallVerdict::kFailed;
  }
  const uint32_t word = error_->read();
  const auto ran =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - call.issued);
  const rules::CallVerdict verdict = rules::judgeCall(completed, word, ran, timeout_);
  if (verdict == rules::CallVerdict::kFailed) *why = rules::describeErrorWord(word);
  if (verdict == rules::CallVerdict::kTimedOut) {
    *why = "not completed after " + std::to_string(ran.count()) + " ms (group timeout " +
           std::to_string(timeout_.count()) + " ms)";
  }
  return verdict;
}

void Watchdog::run() {
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  constexpr auto kFirstPause = std::chrono::microseconds(20);
  constexpr auto kLongestPause = std::chrono::milliseconds(1);
  auto pause = std::chrono::microseconds(kFirstPause);
  for (;;) {
    Call call;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !calls_.empty(); });
      if (calls_.empty()) return;  // stopping, nothing outstanding
      call = calls_.oldest();
      stopping = stopping_;
    }
    std::string why;
    rules::CallVerdict verdict = judge(call, &why);
    if (verdict == rules::CallVerdict::kRunning && stopping) {
      // The drain before stop() waited for the comm stream or gave up on it.
      verdict = rules::CallVerdict::kFailed;
      why = "the group shut down before the call completed";
    }
    if (verdict == rules::CallVerdict::kRunning) {
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(pause * 2, kLongestPause);
      continue;
    }
    pause = kFirstPause;
    std::deque<Call> settled;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      settled = calls_.settle(verdict);
    }
    // At shutdown the group is not failed for what the drain gave up on (and a Python abort
    // hook could then need the interpreter that the joining thread may hold).
    settle(std::move(settled), verdict, why, /*failGroup=*/!stopping);
  }
}

void Watchdog::settle(std::deque<Call> calls, rules::CallVerdict verdict, const std::string& why,
                      bool failGroup) {
  if (calls.empty()) return;
  if (verdict == rules::CallVerdict::kDone) {
    for (Call& call : calls) call.work->settle(nullptr, completions_);
    return;
  }
  // Kernels still spinning on the failed call's flags return at their next poll; every later
  // call and wait of the group raises from now on.
  error_->abort();
  const std::string reason =
      "xccl: GPU " + calls.front().what +
      (verdict == rules::CallVerdict::kTimedOut ? " timed out: " : " failed: ") + why;
  if (failGroup) {
    try {
      onFailure_(reason);
    } catch (const std::exception& e) {
      XCCL_WARN("backend", "failing the group after ", reason, ": ", e.what());
    }
  }
  const ErrorKind kind =
      verdict == rules::CallVerdict::kTimedOut ? ErrorKind::kTimeout : ErrorKind::kAborted;
  bool first = true;
  for (Call& call : calls) {
    const std::string text =
        first ? reason
              : "xccl: GPU " + call.what + " not completed: an earlier call failed: " + reason;
    call.work->settle(torchError(kind, text), completions_);
    first = false;
  }
}

}  // namespace xccl::backend
