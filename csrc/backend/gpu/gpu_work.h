// The Work of a GPU-side call (gpu_path.h): a kernel-route collective on the group's comm stream,
// or a host-route / world-size-1 call on the caller's stream.
//
// Completion is an event recorded on the comm stream after the collective (docs/gpu.md,
// "Streams and Work"):
//  - wait() makes the caller's current stream wait on that event; for a kernel-route call it then
//    blocks the host until the event completed (within `timeout`, or the group's timeout without
//    one; DistBackendError after it) and reads the group's error word (gpu_error.h): a call that
//    failed while it ran (a kernel timed out, a peer died) raises in its own wait, its output is
//    never handed out as good (rules::awaitCall). Host-route and world-size-1 calls block only
//    with a timeout;
//  - synchronize() only makes the caller's stream wait on the event (the host never blocks);
//  - wait() and isCompleted() raise DistBackendError once the group's error word is set,
//    whichever call set it: a failed group never reports success;
//  - the future carries the device, and is completed while the comm stream is current, so a
//    consumer synchronises by event like with ProcessGroupNCCL's futures.
// Tensors stay referenced by the Work; the group also keeps them until the event completes,
// whatever happens to the Work (gpu_events.h, InFlight).
#pragma once

#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <memory>
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
  // word, shared so the Work may outlive the group. `groupTimeout` bounds wait() without a
  // timeout; none for a call that cannot fail once issued (host route, world size 1: nothing of
  // it runs on the device but copies) or under XCCL_GPU_BLOCKING_WAIT=0: wait() without a
  // timeout then only joins the stream.
  // Construct right after recording `done` on `comm` (the future is completed on it).
  GpuWork(int rank, c10d::OpType opType, const char* opName, c10::Stream comm,
          std::shared_ptr<CudaEvent> done, bool captured, std::vector<at::Tensor> outputs,
          std::shared_ptr<const ErrorWord> error,
          std::optional<std::chrono::milliseconds> groupTimeout);

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

 private:
  // Makes the caller's current stream (on device_) wait for the collective.
  void joinCurrentStream();
  void checkErrorWord() const;

  const std::string opName_;
  const c10::Device device_;
  const std::shared_ptr<CudaEvent> done_;
  const bool captured_;
  const std::vector<at::Tensor> outputs_;
  const std::shared_ptr<const ErrorWord> error_;
  const std::optional<std::chrono::milliseconds> groupTimeout_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  int sourceRank_ = -1;
};

}  // namespace xccl::backend
