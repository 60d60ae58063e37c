// VendorRoute (gpu_vendor_route.h): the inner vendor group, the calls and batches it runs, and
// its end.
#include "backend/gpu/gpu_vendor_route.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "backend/core/group_core.h"
#include "backend/gpu/gpu_stream.h"
#include "common/logging.h"

namespace xccl::backend {

// Created when the GPU side is (GpuPath's constructor) where a vendor route is possible, so that
// no graph capture ever constructs it.
c10d::Backend* VendorRoute::group(const char* op) {
  (void)op;
  std::lock_guard<std::mutex> guard(shared_.resourceMutex);
  if (!vendor_ && !vendorTried_) {
    vendorTried_ = true;
    GroupCore& group = shared_.group;
    auto store = c10::make_intrusive<c10d::PrefixStore>("xccl/vendor/", group.membership().store());
    vendor_ =
        group.policy().makeVendorGroup(store, group.membership().rank(), group.membership().size(),
                                       group.sequencer().timeout(), group.membership().groupName());
    if (!vendor_) {
      XCCL_WARN("backend", "no vendor library (NCCL/RCCL) in this torch: GPU collectives "
                           "without a kernel go through host memory");
    }
  }
  return vendor_.get();
}

void VendorRoute::checkCapturable(const char* op, bool captured) const {
  // NCCL sets up its communicator (device memory, a store exchange) at the group's first
  // collective, which a capture cannot hold: refuse rather than break the capture.
  TORCH_CHECK(!captured || usedEagerly_, "xccl ", op,
              ": this call takes the vendor route "
              "(NCCL/RCCL), whose first collective sets up its communicator and cannot run "
              "during CUDA graph capture; run the same collectives once before capturing (a "
              "warm-up iteration), as torch.cuda.graph's documentation recommends");
}

c10::intrusive_ptr<c10d::Work> VendorRoute::run(const char* op, c10d::Backend& vendor,
                                                const LibraryCall& call) {
  const bool captured = capturing(shared_.device);
  checkCapturable(op, captured);
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(shared_.device));
  std::lock_guard<std::timed_mutex> issue(shared_.issueMutex);
  shared_.order->beforeVendor(currentGpuStream(shared_.device).stream(), captured);
  c10::intrusive_ptr<c10d::Work> work = call.onVendor(vendor);
  if (!captured) usedEagerly_ = true;
  // Inside a batch NCCL runs nothing before endCoalescing, whose Work counts instead.
  if (!coalescing_) shared_.order->afterVendor(work, captured);
  return work;
}

void VendorRoute::startBatch(const char* op) {
  TORCH_CHECK_VALUE(shared_.placement.ranksPerGpu == 1, "xccl ", op,
                    ": batch_isend_irecv / "
                    "coalescing with CUDA tensors runs on NCCL/RCCL, which refuse ranks that "
                    "share a GPU; issue the operations one by one");
  c10d::Backend* vendor = group(op);
  TORCH_CHECK_VALUE(vendor != nullptr, "xccl ", op,
                    ": batch_isend_irecv / coalescing with "
                    "CUDA tensors runs on NCCL/RCCL, which this torch lacks; issue the "
                    "operations one by one");
  shared_.checkHealthy(op);
  const bool captured = capturing(shared_.device);
  checkCapturable(op, captured);
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(shared_.device));
  std::lock_guard<std::timed_mutex> issue(shared_.issueMutex);
  shared_.order->beforeVendor(currentGpuStream(shared_.device).stream(), captured);
  vendor->startCoalescing();
  coalescing_ = true;
}

c10::intrusive_ptr<c10d::Work> VendorRoute::endBatch() {
  coalescing_ = false;
  const bool captured = capturing(shared_.device);
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(shared_.device));
  std::lock_guard<std::timed_mutex> issue(shared_.issueMutex);
  shared_.order->beforeVendor(currentGpuStream(shared_.device).stream(), captured);
  c10::intrusive_ptr<c10d::Work> work = group("endCoalescing")->endCoalescing();
  if (!captured) usedEagerly_ = true;
  shared_.order->afterVendor(work, captured);
  return work;
}

void VendorRoute::shutdown() {
  c10::intrusive_ptr<c10d::Backend> vendor;
  {
    std::lock_guard<std::mutex> guard(shared_.resourceMutex);
    vendor = vendor_;
  }
  if (vendor) {
    try {
      vendor->shutdown();
    } catch (const std::exception& e) {
      XCCL_WARN("backend", "GPU shutdown: the vendor group: ", e.what());
    }
  }
}

void VendorRoute::abort() {
  std::lock_guard<std::mutex> guard(shared_.resourceMutex);
  if (vendor_) vendor_->abort();
}

}  // namespace xccl::backend
