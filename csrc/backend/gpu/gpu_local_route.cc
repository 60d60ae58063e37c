// LocalRoute (gpu_local_route.h): a GPU call at world size 1.
#include "backend/gpu/gpu_local_route.h"

#include "backend/core/group_core.h"
#include "backend/gpu/gpu_stream.h"
#include "backend/gpu/gpu_work.h"

namespace xccl::backend {

c10::intrusive_ptr<c10d::Work> LocalRoute::run(c10d::OpType type, const char* op, at::Tensor output,
                                               const std::function<void()>& body) {
  const bool captured = capturing(shared_.device);
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(shared_.device));
  std::lock_guard<std::timed_mutex> issue(shared_.issueMutex);
  GpuStream current = currentGpuStream(shared_.device);
  shared_.order->beforeCurrentStream(current.stream(), captured);
  body();  // nothing, one copy or one scaling, on the caller's stream; never the workspace
  std::shared_ptr<CudaEvent> done = shared_.events->take();
  XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(EventRecord)(done->get(), current.stream()));
  counts_.count(algo::GpuRoute::kLocal);
  return c10::make_intrusive<GpuWork>(shared_.group.membership().rank(), type, op, current.unwrap(),
                                      done, captured, std::vector<at::Tensor>{output},
                                      shared_.error, std::nullopt);
}

}  // namespace xccl::backend
