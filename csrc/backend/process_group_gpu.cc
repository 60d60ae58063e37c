// ProcessGroupXccl's door to its GPU side (gpu_side.h): which calls go there, creating it, and the
// vendor-library factory Python registers.
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
std::unique_ptr<GpuSide> makeGpuSide(ProcessGroupXccl&, Side&, int device) {
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
  checkUsable(opName);
  std::lock_guard<std::mutex> guard(gpuMutex_);
  if (!gpu_) {
    int device = -1;
    for (const at::Tensor* t : tensors) {
      if (t->defined() && t->is_cuda()) {
        device = t->device().index();
        break;
      }
    }
    gpu_ = makeGpuSide(*this, *cpu_, device);
  }
  // The first CUDA call of a coalesced batch opens the batch on the GPU side. Not under
  // stateMutex_: that may create the vendor group, which calls into Python.
  // A batch that cannot run on the GPU is abandoned before the ValueError: torch never ends a
  // batch whose body raised, and later calls must not find it still open.
  bool opensBatch = false;
  {
    std::lock_guard<std::mutex> state(stateMutex_);
    dropClosedGpuBatchLocked();
    opensBatch = coalescing_ && !gpuCoalescing_;
    if (opensBatch && !coalesced_.empty()) {
      coalescing_ = false;
      coalesced_.clear();
      TORCH_CHECK_VALUE(false, "xccl ", opName,
                        ": a coalesced batch (batch_isend_irecv) mixes "
                        "CPU and CUDA tensors; use one device per batch");
    }
  }
  if (opensBatch) {
    try {
      gpu_->startCoalescing(opName);
    } catch (...) {
      std::lock_guard<std::mutex> state(stateMutex_);
      coalescing_ = false;
      throw;
    }
    std::lock_guard<std::mutex> state(stateMutex_);
    gpuCoalescing_ = true;
  }
  return *gpu_;
}

void ProcessGroupXccl::abortGpu() {
  std::lock_guard<std::mutex> guard(gpuMutex_);
  if (gpu_) gpu_->abort();
}

}  // namespace xccl::backend
