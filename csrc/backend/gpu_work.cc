#include "backend/gpu_work.h"

#include <c10/core/StreamGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <thread>

namespace xccl::backend {

void checkCuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    C10_THROW_ERROR(DistBackendError,
                    std::string("xccl: ") + what + " failed: " + cudaGetErrorString(status));
  }
}

CudaEvent::CudaEvent() {
  checkCuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

bool CudaEvent::query() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();  // NotReady is sticky in the last-error slot; it is no error
    return false;
  }
  checkCuda(status, "cudaEventQuery");
  return true;
}

GpuWork::GpuWork(int rank, c10d::OpType opType, const char* opName, c10::Stream comm,
                 std::shared_ptr<CudaEvent> done, bool captured, std::vector<at::Tensor> outputs,
                 std::function<std::string()> deviceError)
    : c10d::Work(rank, opType, opName),
      opName_(opName),
      device_(comm.device()),
      done_(std::move(done)),
      captured_(captured),
      outputs_(std::move(outputs)),
      deviceError_(std::move(deviceError)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), std::vector<c10::Device>{device_})) {
  // The future records its own event on the current stream: make that the comm stream, so
  // callbacks and consumers wait for the collective, not for whatever the caller runs next.
  c10::StreamGuard guard(comm);
  future_->markCompleted(c10::IValue(outputs_));
}

bool GpuWork::isCompleted() {
  if (captured_) return true;
  if (!done_->query()) return false;
  checkDeviceError();
  return true;
}

void GpuWork::joinCurrentStream() {
  cudaStream_t current = c10::cuda::getCurrentCUDAStream(device_.index()).stream();
  checkCuda(cudaStreamWaitEvent(current, done_->get(), 0), "cudaStreamWaitEvent");
}

void GpuWork::synchronize() { joinCurrentStream(); }

bool GpuWork::wait(std::chrono::milliseconds timeout) {
  if (captured_) return true;  // the capturing stream joined the collective already
  if (timeout == kNoTimeout) {
    joinCurrentStream();
    return true;
  }
  // A host wait: poll with short sleeps (a blocking-sync event would need its own flags, and
  // cudaEventSynchronize cannot be bounded).
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(20);
  while (!done_->query()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      C10_THROW_ERROR(DistBackendError, "xccl " + opName_ + ": wait(" +
                                            std::to_string(timeout.count()) +
                                            " ms) timed out; the collective is still running "
                                            "on the GPU");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
  }
  checkDeviceError();
  return true;
}

void GpuWork::checkDeviceError() {
  if (!deviceError_) return;
  const std::string error = deviceError_();
  if (!error.empty()) C10_THROW_ERROR(DistBackendError, "xccl " + opName_ + ": " + error);
}

}  // namespace xccl::backend
