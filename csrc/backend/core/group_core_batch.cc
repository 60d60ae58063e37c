#include "backend/core/group_core_batch.h"

#include <c10/util/Exception.h>

#include "common/logging.h"

namespace xccl::backend {

void CoalescedBatch::setGpuBatch(GpuBatch gpuBatch) {
  std::lock_guard<std::mutex> guard(mutex_);
  gpuBatch_ = std::move(gpuBatch);
}

void CoalescedBatch::add(const c10::intrusive_ptr<XcclWork>& work, const char* opName) {
  std::lock_guard<std::mutex> guard(mutex_);
  dropClosedGpuBatchLocked();
  if (!coalescing_) return;
  TORCH_CHECK_VALUE(!gpuCoalescing_, "xccl ", opName,
                    ": a coalesced batch (batch_isend_irecv) "
                    "mixes CPU and CUDA tensors; use one device per batch");
  coalesced_.push_back(work);
}

void CoalescedBatch::dropClosedGpuBatchLocked() {
  // The GPU side existed before gpuCoalescing_ could become true.
  if (gpuCoalescing_ && !gpuBatch_.stillOpen()) {
    coalescing_ = false;
    gpuCoalescing_ = false;
  }
}

void CoalescedBatch::start() {
  bool closeGpuBatch = false;
  {
    std::lock_guard<std::mutex> guard(mutex_);
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

CoalescedBatch::WorkPtr CoalescedBatch::end(int rank, uint64_t seq,
                                            std::chrono::milliseconds timeout) {
  std::vector<c10::intrusive_ptr<XcclWork>> works;
  bool onGpu = false;
  {
    std::lock_guard<std::mutex> guard(mutex_);
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
  auto group = c10::make_intrusive<XcclWork>(rank, c10d::OpType::COALESCED, "coalesced", seq,
                                             outputs, timeout);
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

bool CoalescedBatch::joinOnGpu(const char* opName) {
  // A batch that cannot run on the GPU is abandoned before the ValueError: torch never ends a
  // batch whose body raised, and later calls must not find it still open.
  std::lock_guard<std::mutex> state(mutex_);
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

void CoalescedBatch::gpuOpened() {
  std::lock_guard<std::mutex> state(mutex_);
  gpuCoalescing_ = true;
}

void CoalescedBatch::gpuFailed() {
  std::lock_guard<std::mutex> state(mutex_);
  coalescing_ = false;
}

void CoalescedBatch::clear() {
  std::lock_guard<std::mutex> guard(mutex_);
  coalescing_ = gpuCoalescing_ = false;
  coalesced_.clear();
}

}  // namespace xccl::backend
