// GpuPath: coalesced batches of CUDA calls, which the vendor group runs as one (gpu_side.h;
// gpu_path.h says which file holds what).
#include <c10/util/Exception.h>

#include "backend/gpu/gpu_path.h"
#include "backend/gpu/gpu_stream.h"

namespace xccl::backend {

void GpuPath::startCoalescing(const char* op) {
  TORCH_CHECK_VALUE(placement_.ranksPerGpu == 1, "xccl ", op,
                    ": batch_isend_irecv / "
                    "coalescing with CUDA tensors runs on NCCL/RCCL, which refuse ranks that "
                    "share a GPU; issue the operations one by one");
  c10d::Backend* vendor = vendorGroup(op);
  TORCH_CHECK_VALUE(vendor != nullptr, "xccl ", op,
                    ": batch_isend_irecv / coalescing with "
                    "CUDA tensors runs on NCCL/RCCL, which this torch lacks; issue the "
                    "operations one by one");
  checkHealthy(op);
  const bool captured = capturing(device_);
  checkVendorCapturable(op, captured);
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  std::lock_guard<std::timed_mutex> issue(issueMutex_);
  order_->beforeVendor(currentGpuStream(device_).stream(), captured);
  vendor->startCoalescing();
  coalescing_ = true;
}

c10::intrusive_ptr<c10d::Work> GpuPath::endCoalescing() {
  coalescing_ = false;
  const bool captured = capturing(device_);
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  std::lock_guard<std::timed_mutex> issue(issueMutex_);
  order_->beforeVendor(currentGpuStream(device_).stream(), captured);
  c10::intrusive_ptr<c10d::Work> work = vendorGroup("endCoalescing")->endCoalescing();
  if (!captured) vendorUsedEagerly_ = true;
  order_->afterVendor(work, captured);
  return work;
}

}  // namespace xccl::backend
