// ProcessGroupXccl's door to its GPU side (gpu_side.h): which calls go there, creating it, the
// coalesced batches it shares with the core (group_core_batch.cc), and the vendor-library factory
// Python registers.
#include <c10/util/Exception.h>

#include "backend/process_group.h"
#include "common/config.h"

namespace xccl::backend {
namespace {

std::mutex& factoryMutex() {
  static std::mutex mutex;
  return mutex;
}

VendorFactory& factorySlot() {
  static VendorFactory factory;
  return factory;
}

}  // namespace

void setVendorFactory(VendorFactory factory) {
  std::lock_guard<std::mutex> guard(factoryMutex());
  factorySlot() = std::move(factory);
}

VendorFactory vendorFactory() {
  std::lock_guard<std::mutex> guard(factoryMutex());
  return factorySlot();
}

#if !XCCL_WITH_CUDA
std::unique_ptr<GpuSide> makeGpuSide(GroupCore&, Side&, int device) {
  C10_THROW_ERROR(ValueError, c10::str("xccl: got a tensor on cuda:", device,
                                       ", but this build "
                                       "of xccl has no CUDA support (it was built against a "
                                       "CPU-only torch or without a CUDA compiler; see the "
                                       "README)"));
}
#endif

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
    core_->setGpuBatch({[this] { return gpu_->coalescing(); },
                        [this] {
                          std::lock_guard<std::mutex> guard(gpuMutex_);
                          (void)gpu_->endCoalescing();
                        },
                        [this] {
                          std::lock_guard<std::mutex> guard(gpuMutex_);
                          return gpu_->endCoalescing();
                        }});
  }
  // The first CUDA call of a coalesced batch opens the batch on the GPU side. Not under the
  // core's lock: that may create the vendor group, which calls into Python.
  if (core_->joinBatchOnGpu(opName)) {
    try {
      gpu_->startCoalescing(opName);
    } catch (...) {
      core_->gpuBatchFailed();
      throw;
    }
    core_->gpuBatchOpened();
  }
  return *gpu_;
}

void ProcessGroupXccl::startCoalescing() { core_->startCoalescing(); }

c10::intrusive_ptr<c10d::Work> ProcessGroupXccl::endCoalescing() { return core_->endCoalescing(); }

void ProcessGroupXccl::abortGpu() {
  std::lock_guard<std::mutex> guard(gpuMutex_);
  if (gpu_) gpu_->abort();
}

}  // namespace xccl::backend
