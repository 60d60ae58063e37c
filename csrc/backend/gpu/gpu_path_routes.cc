// GpuPath: the routes other than the kernel: the vendor and host routes, and world size 1
// (gpu_path.h says which file holds what).
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "backend/core/group_core.h"
#include "backend/gpu/gpu_path.h"
#include "backend/gpu/gpu_stream.h"
#include "common/logging.h"

namespace xccl::backend {

c10::intrusive_ptr<c10d::Work> GpuPath::other(const char* op, algo::GpuRoute route,
                                              const char* reason, const Call& call,
                                              const std::vector<at::Tensor*>& args,
                                              const std::vector<at::Tensor*>& outputs) {
  if (coalescing_ && route != algo::GpuRoute::kVendor) {
    (void)endCoalescing();  // what the batch held so far still runs
    TORCH_CHECK_VALUE(false, "xccl ", op,
                      " cannot be part of a coalesced batch with CUDA "
                      "tensors (",
                      reason, "); the batch was closed");
  }
  c10::intrusive_ptr<c10d::Work> work;
  if (route == algo::GpuRoute::kVendor) {
    c10d::Backend* vendor = vendorGroup(op);
    TORCH_INTERNAL_ASSERT(vendor != nullptr, "planned the vendor route without a vendor group");
    work = viaVendor(op, *vendor, call);
  } else {
    work = viaHost(op, call, args, outputs);
  }
  countRoute(route == algo::GpuRoute::kVendor ? route : algo::GpuRoute::kHost);
  return work;
}

void GpuPath::countRoute(algo::GpuRoute route) {
  static_assert(static_cast<size_t>(algo::GpuRoute::kLocal) + 1 == GpuRouteCounts::kRoutes);
  const auto index = static_cast<size_t>(route);
  routeCalls_[index].fetch_add(1, std::memory_order_relaxed);
  countProcessGpuRoute(index);
}

GpuRouteCounts GpuPath::routeCounts() const {
  GpuRouteCounts counts;
  for (size_t r = 0; r < GpuRouteCounts::kRoutes; ++r) {
    counts.calls[r] = routeCalls_[r].load(std::memory_order_relaxed);
  }
  return counts;
}

// Created when the GPU side is (GpuPath's constructor) where a vendor route is possible, so that
// no graph capture ever constructs it.
c10d::Backend* GpuPath::vendorGroup(const char* op) {
  (void)op;
  std::lock_guard<std::mutex> guard(mutex_);
  if (!vendor_ && !vendorTried_) {
    vendorTried_ = true;
    auto store =
        c10::make_intrusive<c10d::PrefixStore>("xccl/vendor/", group_.membership().store());
    vendor_ =
        group_.policy().makeVendorGroup(store, group_.membership().rank(),
                                        group_.membership().size(), group_.sequencer().timeout(),
                                        group_.membership().groupName());
    if (!vendor_) {
      XCCL_WARN("backend", "no vendor library (NCCL/RCCL) in this torch: GPU collectives "
                           "without a kernel go through host memory");
    }
  }
  return vendor_.get();
}

void GpuPath::checkVendorCapturable(const char* op, bool captured) const {
  // NCCL sets up its communicator (device memory, a store exchange) at the group's first
  // collective, which a capture cannot hold: refuse rather than break the capture.
  TORCH_CHECK(!captured || vendorUsedEagerly_, "xccl ", op,
              ": this call takes the vendor route "
              "(NCCL/RCCL), whose first collective sets up its communicator and cannot run "
              "during CUDA graph capture; run the same collectives once before capturing (a "
              "warm-up iteration), as torch.cuda.graph's documentation recommends");
}

c10::intrusive_ptr<c10d::Work> GpuPath::viaVendor(const char* op, c10d::Backend& vendor,
                                                  const Call& call) {
  const bool captured = capturing(device_);
  checkVendorCapturable(op, captured);
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  std::lock_guard<std::timed_mutex> issue(issueMutex_);
  order_->beforeVendor(currentGpuStream(device_).stream(), captured);
  c10::intrusive_ptr<c10d::Work> work = call.onVendor(vendor);
  if (!captured) vendorUsedEagerly_ = true;
  // Inside a batch NCCL runs nothing before endCoalescing, whose Work counts instead.
  if (!coalescing_) order_->afterVendor(work, captured);
  return work;
}

c10::intrusive_ptr<c10d::Work> GpuPath::viaHost(const char* op, const Call& call,
                                                const std::vector<at::Tensor*>& args,
                                                const std::vector<at::Tensor*>& outputs) {
  TORCH_CHECK(!capturing(device_), "xccl ", op,
              ": this call would go through host memory, which "
              "cannot be captured in a CUDA graph");
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  std::lock_guard<std::timed_mutex> issue(issueMutex_);
  GpuStream current = currentGpuStream(device_);
  // The copies below synchronise the caller's stream: make it follow the other routes first.
  order_->beforeCurrentStream(current.stream(), false);
  std::vector<at::Tensor> originals;
  for (at::Tensor* t : args) {
    originals.push_back(*t);
    *t = t->to(at::kCPU);  // waits for the caller's stream
  }
  auto restore = [&] {
    for (size_t i = 0; i < args.size(); ++i) *args[i] = originals[i];
  };
  std::vector<at::Tensor> hostOutputs;
  c10d::OpType type = c10d::OpType::UNKNOWN;
  int source = -1;
  try {
    c10::intrusive_ptr<c10d::Work> hostWork = call.onHost(cpu_);
    hostWork->wait();
    type = hostWork->retrieveOpType();
    if (type == c10d::OpType::RECVANYSOURCE) source = hostWork->sourceRank();
    for (at::Tensor* t : outputs) hostOutputs.push_back(*t);
  } catch (...) {
    restore();
    throw;
  }
  restore();
  std::vector<at::Tensor> results;
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i]->copy_(hostOutputs[i]);  // on the caller's stream, like any later work
    results.push_back(*outputs[i]);
  }
  std::shared_ptr<CudaEvent> done = events_->take();
  XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(EventRecord)(done->get(), current.stream()));
  auto work = c10::make_intrusive<GpuWork>(group_.membership().rank(), type, op, current.unwrap(),
                                           done, false, results, error_, std::nullopt);
  work->setSourceRank(source);
  return work;
}

c10::intrusive_ptr<c10d::Work> GpuPath::solo(c10d::OpType type, const char* op, at::Tensor output,
                                             const std::function<void()>& body) {
  const bool captured = capturing(device_);
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  std::lock_guard<std::timed_mutex> issue(issueMutex_);
  GpuStream current = currentGpuStream(device_);
  order_->beforeCurrentStream(current.stream(), captured);
  body();  // nothing, one copy or one scaling, on the caller's stream; never the workspace
  std::shared_ptr<CudaEvent> done = events_->take();
  XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(EventRecord)(done->get(), current.stream()));
  countRoute(algo::GpuRoute::kLocal);
  return c10::make_intrusive<GpuWork>(group_.membership().rank(), type, op, current.unwrap(), done,
                                      captured, std::vector<at::Tensor>{output}, error_,
                                      std::nullopt);
}

}  // namespace xccl::backend
