// RouteChoice: which route each call takes (a part of the GPU side, gpu_path.h). algo::planGpu
// decides everything from the request, this host's topology and the tunables; RouteChoice holds
// the group's part of the request (fixed at creation), fills in the call's part and what the group
// found out since (a refused workspace, no vendor group, an open batch), caches the plans, and
// has what a plan needs created before it is taken (the workspace, the vendor group), planning
// again, the same way on every rank, when that showed it cannot exist.
//
// Shared state it takes (gpu_shared.h): resourceMutex (to read the kernel session's and the
// vendor route's findings in one critical section), the tunables and the group's tuning table.
// planMutex_ is its own: it guards the plan cache alone, and nothing is taken while it is held.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "algo/gpu_plan.h"
#include "backend/gpu/gpu_kernel_session.h"
#include "backend/gpu/gpu_shared.h"
#include "backend/gpu/gpu_vendor_route.h"
#include "common/types.h"
#include "kernels/launch.h"

namespace xccl::backend {

class RouteChoice {
 public:
  RouteChoice(GpuShared& shared, KernelSession& session, VendorRoute& vendor)
      : shared_(shared), session_(session), vendor_(vendor) {}
  RouteChoice(const RouteChoice&) = delete;
  RouteChoice& operator=(const RouteChoice&) = delete;

  // Once, by GpuPath's constructor, before any call plans: the group's part of every request
  // (world, hosts, GPUs, whether kernels fit and are verified, time slicing) and the grid cap
  // for ranks sharing a GPU (algo::kCannotFit routes around the kernels).
  void fixGroup(const algo::GpuRequest& group, int maxBlocks) {
    groupRequest_ = group;
    maxBlocks_ = maxBlocks;
  }

  // The plan of one call (bytes in nccl-tests' convention, gpu_plan.h). Creates what the plan
  // needs first (the workspace, the vendor group) and plans again, the same way on every rank,
  // when that showed it cannot exist.
  algo::GpuPlan planFor(algo::GpuCollective collective, size_t bytes, DataType dtype, ReduceOp op,
                        bool evenSplits = true, bool vendorReduces = true);
  kernels::LaunchShape launchShape() const { return kernels::LaunchShape{maxBlocks_}; }

 private:
  // The call's part of a request and what the group found out so far (the rest is fixed).
  struct PlanKey {
    size_t bytes;
    uint8_t collective, dtype, op;
    uint8_t flags;  // algo::gpuCallFlags
    bool operator==(const PlanKey& o) const {
      return bytes == o.bytes && collective == o.collective && dtype == o.dtype && op == o.op &&
             flags == o.flags;
    }
  };
  struct PlanKeyHash {
    size_t operator()(const PlanKey& k) const {
      return std::hash<size_t>()(k.bytes) ^ (size_t{k.collective} << 1 | size_t{k.dtype} << 9 |
                                             size_t{k.op} << 17 | size_t{k.flags} << 25);
    }
  };
  // The plan for `key`: a hash lookup, or algo::planGpu on groupRequest_ plus the key's part.
  algo::GpuPlan cachedPlan(const PlanKey& key);

  GpuShared& shared_;
  KernelSession& session_;
  VendorRoute& vendor_;
  algo::GpuRequest groupRequest_;  // fixGroup's, then read only
  int maxBlocks_ = 0;  // LaunchShape::maxBlocks; kCannotFit routes around the kernels
  static constexpr size_t kMaxCachedPlans = 4096;
  std::mutex planMutex_;
  std::unordered_map<PlanKey, algo::GpuPlan, PlanKeyHash> plans_;  // under planMutex_
};

}  // namespace xccl::backend
