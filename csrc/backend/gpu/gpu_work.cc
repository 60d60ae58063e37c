#include "backend/gpu/gpu_work.h"
#include "backend/gpu/gpu_stream.h"

#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "backend/core/torch_error.h"
#include "backend/gpu/gpu_rules.h"

namespace xccl::backend {
namespace {

// The runtime's capture modes, for rules::queryBesideCapture.
struct RuntimeCaptureModes {
  using Mode = XCCL_RT(StreamCaptureMode);
  static constexpr Mode kThreadLocal = XCCL_RT(StreamCaptureModeThreadLocal);
  static constexpr Mode kRelaxed = XCCL_RT(StreamCaptureModeRelaxed);
  static void exchange(Mode* mode) {
    XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(ThreadExchangeStreamCaptureMode)(mode));
  }
};

}  // namespace

CudaEvent::CudaEvent() {
  XCCL_GPU_CHECK(ErrorKind::kSystem,
                 XCCL_RT(EventCreateWithFlags)(&event_, XCCL_RT(EventDisableTiming)));
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) (void)XCCL_RT(EventDestroy)(event_);  // a destructor has no one to tell
}

bool CudaEvent::query() const {
  // Every query of the GPU side comes here: the watchdog's thread, wait() and is_completed()
  // from any thread, the in-flight list and the stream order. None may break a capture that
  // another thread runs (gpu_rules.h, "Event queries beside a graph capture"). Named for the
  // message: XCCL_GPU_CHECK names what it checks.
  const gpuError_t eventQuery = rules::queryBesideCapture<RuntimeCaptureModes>(
      [this] { return XCCL_RT(EventQuery)(event_); });
  if (eventQuery == XCCL_RT(ErrorNotReady)) {
    (void)gpuGetLastError();  // NotReady is sticky in the last-error slot; it is no error
    return false;
  }
  XCCL_GPU_CHECK(ErrorKind::kSystem, eventQuery);
  return true;
}

bool CudaEvent::pollUntil(std::chrono::steady_clock::time_point deadline) const {
  auto pause = std::chrono::microseconds(20);
  while (!query()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
  }
  return true;
}

GpuWork::GpuWork(int rank, c10d::OpType opType, const char* opName, c10::Stream comm,
                 std::shared_ptr<CudaEvent> done, bool captured, std::vector<at::Tensor> outputs,
                 std::shared_ptr<const ErrorWord> error,
                 std::optional<std::chrono::milliseconds> groupTimeout, bool watched)
    : c10d::Work(rank, opType, opName),
      opName_(opName),
      device_(comm.device()),
      done_(std::move(done)),
      captured_(captured),
      outputs_(std::move(outputs)),
      error_(std::move(error)),
      groupTimeout_(groupTimeout),
      watched_(watched),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                   std::vector<c10::Device>{device_})) {
  if (watched_) return;  // the watchdog completes the future (settle)
  // The future records its own event on the current stream: make that the comm stream, so
  // callbacks and consumers wait for the collective, not for whatever the caller runs next.
  c10::StreamGuard guard(comm);
  future_->markCompleted(c10::IValue(outputs_));
}

void GpuWork::settle(std::exception_ptr failure, const std::optional<c10::Stream>& completions) {
  {
    std::lock_guard<std::mutex> guard(settleMutex_);
    if (settled_) return;
    failure_ = failure;
    settled_ = true;
  }
  settledChanged_.notify_all();
  // Callbacks run here, on the watchdog's thread, as Gloo's run on its worker threads.
  try {
    if (failure) {
      future_->setError(failure);
    } else {
      std::optional<c10::StreamGuard> guard;
      if (completions) guard.emplace(*completions);
      future_->markCompleted(c10::IValue(outputs_));
    }
  } catch (...) {
    // A callback's exception is the future's (c10 sets it); this is the event record's.
    if (!future_->completed()) future_->setErrorIfNeeded(std::current_exception());
  }
}

bool GpuWork::settledWithin(std::chrono::milliseconds within) {
  std::unique_lock<std::mutex> lock(settleMutex_);
  return settledChanged_.wait_for(lock, within, [&] { return settled_; });
}

bool GpuWork::isCompleted() {
  checkFailed();
  if (captured_) return true;
  if (watched_) {
    std::lock_guard<std::mutex> guard(settleMutex_);
    return settled_;  // a failed one raised above
  }
  if (!torchErrors([&] { return done_->query(); })) return false;
  checkFailed();  // the word as of the collective's end
  return true;
}

void GpuWork::joinCurrentStream() {
  gpuStream_t current = currentGpuStream(device_.index()).stream();
  torchErrors([&] {
    XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(StreamWaitEvent)(current, done_->get(), 0));
  });
}

void GpuWork::synchronize() {
  // A captured call's event belongs to the graph: eager code may not wait on it, and the
  // capturing stream joined the collective already.
  if (captured_) return;
  joinCurrentStream();
}

bool GpuWork::wait(std::chrono::milliseconds timeout) {
  checkFailed();
  if (captured_) return true;  // the capturing stream joined the collective already
  // Later work on the caller's stream follows the call, whatever the host sees below.
  joinCurrentStream();
  const std::optional<std::chrono::milliseconds> bound =
      timeout == kNoTimeout ? std::nullopt : std::optional<std::chrono::milliseconds>(timeout);
  if (!rules::waitBlocksHost(groupTimeout_.has_value(), bound.has_value(), watched_)) {
    return true;
  }
  // The watchdog names the call when it times out at the group timeout: the margin lets its
  // verdict arrive first.
  constexpr std::chrono::milliseconds kVerdictMargin{2000};
  const rules::WaitOutcome outcome = rules::awaitCall(
      bound, groupTimeout_.value_or(timeout) + kVerdictMargin,
      [&](std::chrono::milliseconds within) {
        if (watched_) return settledWithin(within);  // sleeps until the watchdog's verdict
        return torchErrors(
            [&] { return done_->pollUntil(std::chrono::steady_clock::now() + within); });
      },
      [&] {
        {
          std::lock_guard<std::mutex> guard(settleMutex_);
          if (failure_) return true;
        }
        return error_ != nullptr && error_->read() != 0;
      });
  if (outcome == rules::WaitOutcome::kTimedOut) {
    const auto waited = bound.value_or(groupTimeout_.value_or(timeout));
    throwTorchError(ErrorKind::kTimeout, "xccl " + opName_ + ": wait(" +
                                             std::to_string(waited.count()) +
                                             " ms) timed out; the collective is still running "
                                             "on the GPU");
  }
  checkFailed();  // kFailed: raises with what failed
  return true;
}

void GpuWork::checkFailed() {
  std::exception_ptr failure;
  {
    std::lock_guard<std::mutex> guard(settleMutex_);
    failure = failure_;
  }
  if (failure) std::rethrow_exception(failure);
  if (error_) error_->throwIfSet(opName_.c_str());
}

}  // namespace xccl::backend
