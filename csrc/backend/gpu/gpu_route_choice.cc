// RouteChoice (gpu_route_choice.h): the request to the planner, which route a call takes.
// algo::planGpu decides everything from the request, this host's topology and the tunables;
// planFor fills in what only the group knows at call time (resident blocks, a refused workspace,
// the vendor group, a coalesced batch) and creates what the plan needs.
#include "backend/gpu/gpu_route_choice.h"

#include "backend/core/group_core.h"
#include "backend/core/machine.h"
#include "common/logging.h"

namespace xccl::backend {

algo::GpuPlan RouteChoice::planFor(algo::GpuCollective collective, size_t bytes, DataType dtype,
                                   ReduceOp op, bool evenSplits, bool vendorReduces) {
  algo::GpuRequest call;
  call.evenSplits = evenSplits;
  call.vendorReduces = vendorReduces;
  call.coalescing = vendor_.batchOpen();
  {
    std::lock_guard<std::mutex> guard(shared_.resourceMutex);
    call.ipcRefused = session_.ipcRefusedLocked();
    call.vendorAvailable = vendor_.availableLocked();
  }
  PlanKey key{bytes, static_cast<uint8_t>(collective), static_cast<uint8_t>(dtype),
              static_cast<uint8_t>(op), algo::gpuCallFlags(call)};
  algo::GpuPlan plan = cachedPlan(key);
  const char* name = algo::gpuCollectiveName(collective);
  // The first kernel-route call creates the workspace (a step every rank takes alike, as every
  // rank planned alike); the first vendor-route call of a group whose ranks share a GPU creates
  // the vendor group. Where that failed, the group knows more and plans again.
  if (plan.route == algo::GpuRoute::kKernel && session_.workspaceOrNull(name) == nullptr) {
    key.flags |= algo::kIpcRefused;
    plan = cachedPlan(key);
  }
  if (plan.route == algo::GpuRoute::kVendor && vendor_.group(name) == nullptr) {
    key.flags &= ~algo::kVendorAvailable;
    plan = cachedPlan(key);
  }
  XCCL_DEBUG("backend", name, " ", bytes, " B: ", algo::gpuRouteName(plan.route), " ", plan.name,
             " (", plan.reason, ")");
  return plan;
}

// algo::planGpu is pure in (request, topology, tunables) and only the call's part of the request
// and what the group found out vary within a group, so its plans (with their reason text) are
// computed once per distinct key: training repeats the same few sizes, and a hit costs one hash
// lookup instead of building a request (the group's GPU list) and the planner's strings (issue
// order is kept: callers hold no lock across planning).
algo::GpuPlan RouteChoice::cachedPlan(const PlanKey& key) {
  std::lock_guard<std::mutex> guard(planMutex_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  algo::GpuRequest request = groupRequest_;
  request.collective = static_cast<algo::GpuCollective>(key.collective);
  request.bytes = key.bytes;
  request.dtype = static_cast<DataType>(key.dtype);
  request.op = static_cast<ReduceOp>(key.op);
  algo::setGpuCallFlags(request, key.flags);
  algo::GpuPlan plan =
      algo::planGpu(request, thisMachine(), shared_.tunables, shared_.group.membership().tuning());
  if (plans_.size() >= kMaxCachedPlans) plans_.clear();  // bounded: a sweep over many sizes
  plans_.emplace(key, plan);
  return plan;
}

}  // namespace xccl::backend
