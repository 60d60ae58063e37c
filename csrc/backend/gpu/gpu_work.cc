#include "backend/gpu/gpu_work.h"
#include "backend/gpu/gpu_stream.h"

#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <thread>

#include "backend/core/torch_error.h"

namespace xccl::backend {

CudaEvent::CudaEvent() {
  XCCL_GPU_CHECK(ErrorKind::kSystem,
                 XCCL_RT(EventCreateWithFlags)(&event_, XCCL_RT(EventDisableTiming)));
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) (void)XCCL_RT(EventDestroy)(event_);  // a destructor has no one to tell
}

bool CudaEvent::query() const {
  // Named for the message: XCCL_GPU_CHECK names what it checks.
  const gpuError_t eventQuery = XCCL_RT(EventQuery)(event_);
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
                 std::shared_ptr<const ErrorWord> error)
    : c10d::Work(rank, opType, opName),
      opName_(opName),
      device_(comm.device()),
      done_(std::move(done)),
      captured_(captured),
      outputs_(std::move(outputs)),
      error_(std::move(error)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                   std::vector<c10::Device>{device_})) {
  // The future records its own event on the current stream: make that the comm stream, so
  // callbacks and consumers wait for the collective, not for whatever the caller runs next.
  c10::StreamGuard guard(comm);
  future_->markCompleted(c10::IValue(outputs_));
}

bool GpuWork::isCompleted() {
  checkErrorWord();
  if (captured_) return true;
  if (!torchErrors([&] { return done_->query(); })) return false;
  checkErrorWord();  // the word as of the collective's end
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
  // A failure the host can already see is reported even by the non-blocking wait; one that
  // happens later is reported by the group's next call (docs/gpu.md, "Errors").
  checkErrorWord();
  if (captured_) return true;  // the capturing stream joined the collective already
  if (timeout == kNoTimeout) {
    joinCurrentStream();
    return true;
  }
  if (!torchErrors([&] { return done_->pollUntil(std::chrono::steady_clock::now() + timeout); })) {
    checkErrorWord();  // a peer's failure explains the wait better than the timeout
    throwTorchError(ErrorKind::kTimeout, "xccl " + opName_ + ": wait(" +
                                             std::to_string(timeout.count()) +
                                             " ms) timed out; the collective is still running "
                                             "on the GPU");
  }
  checkErrorWord();
  return true;
}

void GpuWork::checkErrorWord() const {
  if (error_) error_->throwIfSet(opName_.c_str());
}

}  // namespace xccl::backend
