// GroupCore's coalesced batches (batch_isend_irecv, torch's coalescing manager): the Works started
// between startCoalescing and endCoalescing. A batch is all CPU (its Works collected here,
// whichever side started them) or all CUDA (the GPU side's vendor group runs it, gpu_side.h).
#include <c10/util/Exception.h>

#include "backend/core/group_core.h"
#include "common/logging.h"

namespace xccl::backend {

void GroupCore::setGpuBatch(GpuBatch gpuBatch) {
  std::lock_guard<std::mutex> guard(stateMutex_);
  gpuBatch_ = std::move(gpuBatch);
}

void GroupCore::addToBatch(const c10::intrusive_ptr<XcclWork>& work, const char* opName) {
  std::lock_guard<std::mutex> guard(stateMutex_);
  addToBatchLocked(work, opName);
}

void GroupCore::addToBatchLocked(const c10::intrusive_ptr<XcclWork>& work, const char* opName) {
  dropClosedGpuBatchLocked();
  if (!coalescing_) return;
  TORCH_CHECK_VALUE(!gpuCoalescing_, "xccl ", opName,
                    ": a coalesced batch (batch_isend_irecv) "
                    "mixes CPU and CUDA tensors; use one device per batch");
  coalesced_.push_back(work);
}

void GroupCore::dropClosedGpuBatchLocked() {
  // The GPU side existed before gpuCoalescing_ could become true.
  if (gpuCoalescing_ && !gpuBatch_.stillOpen()) {
    coalescing_ = false;
    gpuCoalescing_ = false;
  }
}

void GroupCore::startCoalescing() {
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
  if (closeGpuBatch) gpuBatch_.close();
}

GroupCore::WorkPtr GroupCore::endCoalescing() {
  std::vector<c10::intrusive_ptr<XcclWork>> works;
  bool onGpu = false;
  {
    std::lock_guard<std::mutex> guard(stateMutex_);
    TORCH_CHECK(coalescing_, "xccl: endCoalescing() without startCoalescing()");
    coalescing_ = false;
    std::swap(onGpu, gpuCoalescing_);
    works.swap(coalesced_);
  }
  if (onGpu) return gpuBatch_.end();
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

bool GroupCore::joinBatchOnGpu(const char* opName) {
  // A batch that cannot run on the GPU is abandoned before the ValueError: torch never ends a
  // batch whose body raised, and later calls must not find it still open.
  std::lock_guard<std::mutex> state(stateMutex_);
  dropClosedGpuBatchLocked();
  const bool opensBatch = coalescing_ && !gpuCoalescing_;
  if (opensBatch && !coalesced_.empty()) {
    coalescing_ = false;
    coalesced_.clear();
    TORCH_CHECK_VALUE(false, "xccl ", opName,
                      ": a coalesced batch (batch_isend_irecv) mixes "
                      "CPU and CUDA tensors; use one device per batch");
  }
  return opensBatch;
}

void GroupCore::gpuBatchOpened() {
  std::lock_guard<std::mutex> state(stateMutex_);
  gpuCoalescing_ = true;
}

void GroupCore::gpuBatchFailed() {
  std::lock_guard<std::mutex> state(stateMutex_);
  coalescing_ = false;
}

}  // namespace xccl::backend
