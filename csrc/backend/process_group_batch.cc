// Coalesced batches (batch_isend_irecv, torch's coalescing manager): the Works started between
// startCoalescing and endCoalescing. A batch is all CPU (its Works collected here, whichever
// side started them) or all CUDA (the GPU side's vendor group runs it, gpu_side.h).
#include <c10/util/Exception.h>

#include "backend/process_group.h"
#include "common/logging.h"

namespace xccl::backend {

void ProcessGroupXccl::addToBatchLocked(const c10::intrusive_ptr<XcclWork>& work,
                                        const char* opName) {
  dropClosedGpuBatchLocked();
  if (!coalescing_) return;
  TORCH_CHECK_VALUE(!gpuCoalescing_, "xccl ", opName,
                    ": a coalesced batch (batch_isend_irecv) "
                    "mixes CPU and CUDA tensors; use one device per batch");
  coalesced_.push_back(work);
}

void ProcessGroupXccl::dropClosedGpuBatchLocked() {
  // gpu_ was set (under gpuMutex_) before gpuCoalescing_ could become true.
  if (gpuCoalescing_ && !gpu_->coalescing()) {
    coalescing_ = false;
    gpuCoalescing_ = false;
  }
}

void ProcessGroupXccl::startCoalescing() {
  bool closeGpuBatch = false;
  {
    std::lock_guard<std::mutex> guard(stateMutex_);
    dropClosedGpuBatchLocked();
    if (coalescing_) {
      // torch's coalescing manager never ends a batch whose body raised: close that one (its
      // operations still complete on their own) and start afresh.
      XCCL_WARN("backend", "startCoalescing: the previous batch was never ended (an exception "
                           "inside it?); closing it");
      closeGpuBatch = gpuCoalescing_;
    }
    coalescing_ = true;
    gpuCoalescing_ = false;
    coalesced_.clear();
  }
  if (closeGpuBatch) {
    std::lock_guard<std::mutex> guard(gpuMutex_);
    (void)gpu_->endCoalescing();
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXccl::endCoalescing() {
  std::vector<c10::intrusive_ptr<XcclWork>> works;
  bool onGpu = false;
  {
    std::lock_guard<std::mutex> guard(stateMutex_);
    TORCH_CHECK(coalescing_, "xccl: endCoalescing() without startCoalescing()");
    coalescing_ = false;
    std::swap(onGpu, gpuCoalescing_);
    works.swap(coalesced_);
  }
  if (onGpu) {
    std::lock_guard<std::mutex> guard(gpuMutex_);
    return gpu_->endCoalescing();
  }
  // One Work that completes when every operation issued while coalescing has: the operations
  // already run concurrently (p2p is posted at once), so nothing is re-issued here.
  std::vector<at::Tensor> outputs;
  for (auto& w : works) {
    for (auto& t : w->outputs()) outputs.push_back(t);
  }
  auto group =
      c10::make_intrusive<XcclWork>(rank_, c10d::OpType::COALESCED, "coalesced", seq_.load(),
                                    outputs, effectiveTimeout(c10d::kUnsetTimeout));
  if (works.empty()) {
    group->succeed();
    return group;
  }
  struct Pending {
    std::mutex mutex;
    size_t left;
    std::exception_ptr firstError;  // the batch fails as its first failed operation did
  };
  auto pending = std::make_shared<Pending>();
  pending->left = works.size();
  for (auto& w : works) {
    w->getFuture()->addCallback([pending, group](c10::ivalue::Future& future) {
      std::exception_ptr error;
      bool last;
      {
        std::lock_guard<std::mutex> guard(pending->mutex);
        if (future.hasError() && !pending->firstError) pending->firstError = future.exception_ptr();
        last = --pending->left == 0;
        error = pending->firstError;
      }
      if (!last) return;
      if (error) {
        group->fail(error);
      } else {
        group->succeed();
      }
    });
  }
  return group;
}

}  // namespace xccl::backend
