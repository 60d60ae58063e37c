// ProcessGroupXccl's door to its GPU side (gpu_side.h): which calls go there, creating it, and the
// coalesced batches it shares with the core (core/group_core_batch.cc).
#include <c10/util/Exception.h>

#include "backend/core/torch_error.h"
#include "backend/process_group.h"

namespace xccl::backend {

bool ProcessGroupXccl::gpuTensors(const std::vector<at::Tensor*>& tensors) {
  for (const at::Tensor* t : tensors) {
    if (t->defined() && t->is_cuda()) return true;
  }
  return false;
}

GpuSide& ProcessGroupXccl::gpu(const std::vector<at::Tensor*>& tensors, const char* opName) {
  core_->checkUsable(opName);
  std::lock_guard<std::mutex> guard(gpuMutex_);
  if (!gpu_) {
    int device = -1;
    for (const at::Tensor* t : tensors) {
      if (t->defined() && t->is_cuda()) {
        device = t->device().index();
        break;
      }
    }
    gpu_ = makeGpuSide(*core_, *cpu_, device);
    // gpu_ is set (under gpuMutex_) before the core's batch can be on the GPU.
    core_->batch().setGpuBatch({[this] { return gpu_->coalescing(); },
                                [this] {
                                  std::lock_guard<std::mutex> guard(gpuMutex_);
                                  (void)torchErrors([&] { return gpu_->endCoalescing(); });
                                },
                                [this] {
                                  std::lock_guard<std::mutex> guard(gpuMutex_);
                                  return torchErrors([&] { return gpu_->endCoalescing(); });
                                }});
  }
  // The first CUDA call of a coalesced batch opens the batch on the GPU side. Not under the
  // batch's lock: that may create the vendor group, which calls into Python.
  if (core_->batch().joinOnGpu(opName)) {
    try {
      gpu_->startCoalescing(opName);
    } catch (...) {
      core_->batch().gpuFailed();
      throw;
    }
    core_->batch().gpuOpened();
  }
  return *gpu_;
}

void ProcessGroupXccl::startCoalescing() { core_->batch().start(); }

c10::intrusive_ptr<c10d::Work> ProcessGroupXccl::endCoalescing() { return core_->endCoalescing(); }

void ProcessGroupXccl::abortGpu() {
  std::lock_guard<std::mutex> guard(gpuMutex_);
  if (gpu_) gpu_->abort();
}

GpuRouteCounts ProcessGroupXccl::gpuRouteCounts() {
  std::lock_guard<std::mutex> guard(gpuMutex_);
  return gpu_ ? gpu_->routeCounts() : GpuRouteCounts{};
}

}  // namespace xccl::backend
