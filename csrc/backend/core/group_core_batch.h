// CoalescedBatch: the operations started between startCoalescing and endCoalescing
// (batch_isend_irecv, torch's coalescing manager; GroupCore's part, group_core.h). A batch is all
// CPU (its Works collected here, whichever side started them) or all CUDA (the GPU side's vendor
// group runs it, gpu_side.h). The GPU side is the face's: it lends the batch GpuBatch's callbacks.
//
// Threads: every method may be called from any thread; mutex_ guards the batch. It is a lock of
// its own: no critical section of the batch reads the failure state or the timeout, and renew()
// (which clears the batch beside the failure state) runs with no operation in flight.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <functional>
#include <mutex>
#include <vector>

#include "backend/core/work.h"

namespace xccl::backend {

class CoalescedBatch {
 public:
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;

  struct GpuBatch {
    std::function<bool()> stillOpen;  // the GPU side's coalescing(); called under the batch's lock
    std::function<void()> close;  // ends an abandoned CUDA batch
    std::function<WorkPtr()> end;  // the GPU side's endCoalescing()
  };
  void setGpuBatch(GpuBatch gpuBatch);

  // Adds a CPU operation's Work to the batch when coalescing; a ValueError when the batch
  // already holds CUDA operations.
  void add(const c10::intrusive_ptr<XcclWork>& work, const char* opName);
  void start();
  // Ends the batch: the GPU side's Work for a CUDA batch, else one Work (rank `rank`, sequence
  // number `seq`, timeout `timeout`) that completes when every collected one has, failing as
  // the first of them failed.
  WorkPtr end(int rank, uint64_t seq, std::chrono::milliseconds timeout);
  // A CUDA call while coalescing: true when it opens the batch on the GPU side (the caller then
  // starts it there and reports gpuOpened() or gpuFailed()); a ValueError (closing the batch)
  // when the batch already holds CPU operations.
  bool joinOnGpu(const char* opName);
  void gpuOpened();
  void gpuFailed();
  // A new membership (reconfigure): no batch open.
  void clear();

 private:
  // Forgets a CUDA batch that the GPU side closed after refusing one of its calls.
  void dropClosedGpuBatchLocked();

  std::mutex mutex_;
  bool coalescing_ = false;
  bool gpuCoalescing_ = false;
  std::vector<c10::intrusive_ptr<XcclWork>> coalesced_;
  GpuBatch gpuBatch_;
};

}  // namespace xccl::backend
