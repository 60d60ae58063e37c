// Sides (process_group_sides.h): which calls go to the GPU side, creating it, the coalesced
// batches it shares with the core (core/group_core_batch.cc), and its end with the membership.
#include "backend/process_group_sides.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace xccl::backend {

bool Sides::gpuTensors(const std::vector<at::Tensor*>& tensors) {
  for (const at::Tensor* t : tensors) {
    if (t->defined() && t->is_cuda()) return true;
  }
  return false;
}

GpuSide& Sides::gpu(const std::vector<at::Tensor*>& tensors, const char* opName) {
  core_.checkUsable(opName);
  std::lock_guard<std::mutex> guard(gpuMutex_);
  if (!gpu_) {
    int device = -1;
    for (const at::Tensor* t : tensors) {
      if (t->defined() && t->is_cuda()) {
        device = t->device().index();
        break;
      }
    }
    gpu_ = makeGpuSide(core_, *cpu_, device);
    // gpu_ is set (under gpuMutex_) before the core's batch can be on the GPU.
    core_.batch().setGpuBatch({[this] { return gpu_->coalescing(); },
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
  if (core_.batch().joinOnGpu(opName)) {
    try {
      gpu_->startCoalescing(opName);
    } catch (...) {
      core_.batch().gpuFailed();
      throw;
    }
    core_.batch().gpuOpened();
  }
  return *gpu_;
}

void Sides::abortGpu() {
  std::lock_guard<std::mutex> guard(gpuMutex_);
  if (gpu_) gpu_->abort();
}

void Sides::shutdownGpu() {
  std::lock_guard<std::mutex> guard(gpuMutex_);
  if (gpu_) {
    gpu_->shutdown(
        std::min<std::chrono::milliseconds>(core_.sequencer().timeout(), std::chrono::seconds(30)));
  }
  gpu_.reset();
}

GpuRouteCounts Sides::gpuRouteCounts() {
  std::lock_guard<std::mutex> guard(gpuMutex_);
  return gpu_ ? gpu_->routeCounts() : GpuRouteCounts{};
}

}  // namespace xccl::backend
