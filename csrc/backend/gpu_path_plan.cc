// GpuPath: planning, which route a call takes (gpu_path.h says which file holds what).
// algo::planGpu decides everything from the request, this host's topology and the tunables;
// planFor fills in what only the group knows at call time (resident blocks, a refused workspace,
// the vendor group, a coalesced batch) and creates what the plan needs.
#include "backend/gpu_path.h"
#include "backend/gpu_rules.h"
#include "backend/machine.h"
#include "backend/process_group.h"
#include "common/logging.h"

namespace xccl::backend {

algo::GpuPlan GpuPath::planFor(algo::GpuCollective collective, size_t bytes, DataType dtype,
                               ReduceOp op, bool evenSplits, bool vendorReduces) {
  algo::GpuRequest request;
  request.collective = collective;
  request.bytes = bytes;
  request.dtype = dtype;
  request.op = op;
  request.evenSplits = evenSplits;
  request.vendorReduces = vendorReduces;
  request.coalescing = coalescing_;
  request.worldSize = group_.getSize();
  request.hosts = placement_.hosts;
  request.ranksPerGpu = placement_.ranksPerGpu;
  request.gpus = placement_.gpus;
  request.kernelsFit = maxBlocks_ != rules::kCannotFit;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    request.ipcRefused = !ipcRefused_.empty();
    request.vendorAvailable = !vendorTried_ || vendor_;
  }
  algo::GpuPlan plan = cachedPlan(request);
  const char* name = algo::gpuCollectiveName(collective);
  // The first kernel-route call creates the workspace (a step every rank takes alike, as every
  // rank planned alike); the first vendor-route call of a group whose ranks share a GPU creates
  // the vendor group. Where that failed, the group knows more and plans again.
  if (plan.route == algo::GpuRoute::kKernel && workspaceOrNull(name) == nullptr) {
    request.ipcRefused = true;
    plan = cachedPlan(request);
  }
  if (plan.route == algo::GpuRoute::kVendor && vendorGroup(name) == nullptr) {
    request.vendorAvailable = false;
    plan = cachedPlan(request);
  }
  XCCL_DEBUG("backend", name, " ", bytes, " B: ", algo::gpuRouteName(plan.route), " ", plan.name,
             " (", plan.reason, ")");
  return plan;
}

// algo::planGpu is pure in (request, topology, tunables) and only the call's part of the request
// and what the group found out vary within a group, so its plans (with their reason text) are
// computed once per distinct key: training repeats the same few sizes, and a hit costs one hash
// lookup instead of the planner's string building (issue order is kept: callers hold no lock
// across planning).
algo::GpuPlan GpuPath::cachedPlan(const algo::GpuRequest& request) {
  const uint8_t flags = static_cast<uint8_t>(request.evenSplits | request.vendorReduces << 1 |
                                             request.coalescing << 2 | request.ipcRefused << 3 |
                                             request.vendorAvailable << 4);
  const PlanKey key{request.bytes, static_cast<uint8_t>(request.collective),
                    static_cast<uint8_t>(request.dtype), static_cast<uint8_t>(request.op), flags};
  std::lock_guard<std::mutex> guard(planMutex_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  algo::GpuPlan plan = algo::planGpu(request, thisMachine(), tunables_);
  if (plans_.size() >= kMaxCachedPlans) plans_.clear();  // bounded: a sweep over many sizes
  plans_.emplace(key, plan);
  return plan;
}

}  // namespace xccl::backend
