// The process's GPU route counters (gpu_side.h), and makeGpuSide in builds without the GPU room
// (gpu/), where a CUDA tensor is a ValueError.
#include "backend/core/gpu_side.h"

#include <c10/util/Exception.h>

#include <atomic>

#include "common/config.h"

namespace xccl::backend {
namespace {

std::array<std::atomic<uint64_t>, GpuRouteCounts::kRoutes>& processRoutes() {
  static std::array<std::atomic<uint64_t>, GpuRouteCounts::kRoutes> calls{};
  return calls;
}

}  // namespace

GpuRouteCounts processGpuRouteCounts() {
  GpuRouteCounts counts;
  for (size_t r = 0; r < GpuRouteCounts::kRoutes; ++r) {
    counts.calls[r] = processRoutes()[r].load(std::memory_order_relaxed);
  }
  return counts;
}

void countProcessGpuRoute(size_t route) {
  if (route < GpuRouteCounts::kRoutes) {
    processRoutes()[route].fetch_add(1, std::memory_order_relaxed);
  }
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

}  // namespace xccl::backend
