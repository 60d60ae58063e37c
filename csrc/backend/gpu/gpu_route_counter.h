// The GPU side's route counters (GpuRouteCounts, core/gpu_side.h): this group's calls per route,
// and the process's sum. A part of its own because every route counts (the kernel session, the
// vendor and host routes, the local route) and none should reach into another to do so.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "algo/gpu_plan.h"
#include "backend/core/gpu_side.h"

namespace xccl::backend {

class RouteCounter {
 public:
  // One call ran on `route`: this group's count and the process's. Any thread.
  void count(algo::GpuRoute route) {
    static_assert(static_cast<size_t>(algo::GpuRoute::kLocal) + 1 == GpuRouteCounts::kRoutes);
    const auto index = static_cast<size_t>(route);
    calls_[index].fetch_add(1, std::memory_order_relaxed);
    countProcessGpuRoute(index);
  }
  GpuRouteCounts counts() const {
    GpuRouteCounts counts;
    for (size_t r = 0; r < GpuRouteCounts::kRoutes; ++r) {
      counts.calls[r] = calls_[r].load(std::memory_order_relaxed);
    }
    return counts;
  }

 private:
  std::array<std::atomic<uint64_t>, GpuRouteCounts::kRoutes> calls_{};
};

}  // namespace xccl::backend
