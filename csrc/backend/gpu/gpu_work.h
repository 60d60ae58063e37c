// The Work of a GPU-side call (gpu_path.h): a kernel-route collective on the group's comm stream,
// or a host-route / world-size-1 call on the caller's stream.
//
// Completion is an event recorded on the comm stream after the collective (docs/gpu.md,
// "Streams and Work"). A kernel-route call is "watched": the group's watchdog (gpu_watchdog.h)
// sees its event complete, reads the error word and settles the Work, done or failed, as
// ProcessGroupNCCL's watchdog does for its collectives.
//  - wait() makes the caller's current stream wait on that event, as ProcessGroupNCCL's does:
//    the host runs ahead. It raises DistBackendError at once when the call is already known
//    failed (settled failed, or the group's error word set: a failed group never reports
//    success). It blocks the host, until the call is settled, with the caller's timeout, or
//    without one under XCCL_GPU_BLOCKING_WAIT=1 for a kernel-route call (bounded by the group
//    timeout; then a failure while the call ran raises in its own wait);
//  - synchronize() only makes the caller's stream wait on the event;
//  - isCompleted() raises once the call or the group failed;
//  - the future carries the device. A watched call's completes when the watchdog settled it:
//    with the outputs (their event recorded on the watchdog's idle stream, so a consumer
//    synchronises by event as with ProcessGroupNCCL's futures), or with the error. Others' are
//    completed at issue while the comm stream is current.
// Tensors stay referenced by the Work; the group also keeps them until the event completes,
// whatever happens to the Work (gpu_events.h, InFlight).
#pragma once

#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/gpu/gpu_error.h"
#include "common/gpu_runtime.h"

namespace xccl::backend {

// A CUDA event without timing, destroyed with its owner.
class CudaEvent {
 public:
  CudaEvent();
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  gpuEvent_t get() const { return event_; }
  // Whether the work before the event's record completed; throws on a CUDA error.
  bool query() const;
  // Polls query() with short sleeps until it is true (returns true) or `deadline` passed (false):
  // XCCL_RT(EventSynchronize) cannot be bounded.
  bool pollUntil(std::chrono::steady_clock::time_point deadline) const;

 private:
  gpuEvent_t event_ = nullptr;
};

class ErrorWord;

class GpuWork : public c10d::Work {
 public:
  // `done` was recorded on the comm stream after the collective. `captured`: recorded during
  // CUDA graph capture; the caller's stream already joined it and the event may not be
  // queried, so the Work is complete as far as the host can tell. `error`: the group's error
  // word, shared so the Work may outlive the group. `watched`: settled by the watchdog
  // (settle()), which then completes the future. `groupTimeout` bounds wait() without a
  // timeout, which then blocks the host (XCCL_GPU_BLOCKING_WAIT=1, a watched call); none: it
  // only joins the stream.
  // Construct right after recording `done` on `comm` (an unwatched future is completed on it).
  GpuWork(int rank, c10d::OpType opType, const char* opName, c10::Stream comm,
          std::shared_ptr<CudaEvent> done, bool captured, std::vector<at::Tensor> outputs,
          std::shared_ptr<const ErrorWord> error,
          std::optional<std::chrono::milliseconds> groupTimeout, bool watched = false);

  bool isCompleted() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // The sender of a receive from any source (host route); c10d's error for any other Work.
  int sourceRank() const override {
    return sourceRank_ >= 0 ? sourceRank_ : c10d::Work::sourceRank();
  }
  void setSourceRank(int rank) { sourceRank_ = rank; }
  // The watchdog's verdict, once: done (`failure` null) or failed; completes the future, done on
  // `completions` (current while its event is recorded). Never throws.
  void settle(std::exception_ptr failure, const std::optional<c10::Stream>& completions);

 private:
  // Makes the caller's current stream (on device_) wait for the collective.
  void joinCurrentStream();
  // Raises the watchdog's error for this call, else the group's error word's.
  void checkFailed();
  // Whether the watchdog settled the call within `within`.
  bool settledWithin(std::chrono::milliseconds within);

  const std::string opName_;
  const c10::Device device_;
  const std::shared_ptr<CudaEvent> done_;
  const bool captured_;
  const std::vector<at::Tensor> outputs_;
  const std::shared_ptr<const ErrorWord> error_;
  const std::optional<std::chrono::milliseconds> groupTimeout_;
  const bool watched_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex settleMutex_;
  std::condition_variable settledChanged_;
  bool settled_ = false;  // under settleMutex_
  std::exception_ptr failure_;  // under settleMutex_; set before settled_
  int sourceRank_ = -1;
};

}  // namespace xccl::backend
