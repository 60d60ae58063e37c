#include "backend/core/work.h"

#include <c10/util/Exception.h>

#include <optional>

#include "backend/core/torch_error.h"
#include "common/wait_slice.h"

namespace xccl::backend {

XcclWork::XcclWork(int rank, c10d::OpType opType, const char* profilingTitle, uint64_t seq,
                   std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout)
    : c10d::Work(rank, opType, profilingTitle),
      seq_(seq),
      outputs_(std::move(outputs)),
      timeout_(timeout) {}

c10::intrusive_ptr<c10::ivalue::Future> XcclWork::getFuture() {
  static const c10::TypePtr kTensorList = c10::ListType::create(c10::TensorType::get());
  std::lock_guard<std::mutex> guard(mutex_);
  if (!future_) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(kTensorList);
    // Nobody else holds it yet, so no callback runs under the lock.
    if (settled_ && error_) future_->setError(error_);
    if (settled_ && !error_) future_->markCompleted(c10::IValue(outputs_));
  }
  return future_;
}

bool XcclWork::wait(std::chrono::milliseconds timeout) {
  // The operation reports its own timeout; the margin covers the report reaching us.
  auto bound = timeout == kNoTimeout ? timeout_ + std::chrono::seconds(10) : timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  std::optional<wait_slice::WhileWaiting> slice;  // only for a wait that will sleep
  if (!completed_) slice.emplace();
  if (!cv_.wait_for(lock, bound, [&] { return completed_; })) {
    // "Timed out waiting": the wording of torch's own backends (Gloo), which callers match.
    throwTorchError(ErrorKind::kTimeout, "xccl: Timed out waiting " +
                                             std::to_string(bound.count()) +
                                             "ms in wait() on operation #" + std::to_string(seq_));
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

std::vector<at::Tensor> XcclWork::result() {
  TORCH_CHECK(isCompleted(), "xccl: call wait() before result()");
  return outputs_;
}

int XcclWork::sourceRank() const {
  int rank = sourceRank_.load();
  TORCH_CHECK(rank >= 0, "xccl: sourceRank() is only defined for a completed recv from any source");
  return rank;
}

void XcclWork::succeed() {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    settled_ = true;
    future = future_;
  }
  // Outside the lock: the future's callbacks may run inline and call back into this Work.
  if (future) future->markCompleted(c10::IValue(outputs_));
  finish();
}

void XcclWork::fail(ErrorKind kind, const std::string& message) { fail(torchError(kind, message)); }

void XcclWork::fail(std::exception_ptr error) {
  c10::intrusive_ptr<c10::ivalue::Future> future;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    settled_ = true;
    error_ = error;
    future = future_;
  }
  if (future) future->setError(error);
  finish(error);
}

}  // namespace xccl::backend
