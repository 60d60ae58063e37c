// GpuPath: planning, which route a call takes (gpu_path.h says which file holds what).
// algo::planGpu decides from the request, this host's topology and the tunables; these add what
// only the group knows at call time (resident blocks, the workspace, a coalesced batch).
#include "backend/gpu_path.h"
#include "backend/gpu_rules.h"
#include "backend/machine.h"
#include "backend/process_group.h"
#include "common/env.h"
#include "common/logging.h"

namespace xccl::backend {

algo::GpuPlan GpuPath::planFor(algo::GpuCollective collective, size_t bytes, DataType dtype,
                               ReduceOp op, bool evenSplits) {
  algo::GpuPlan plan = cachedPlan(collective, bytes, dtype, op, evenSplits);
  if (plan.route == algo::GpuRoute::kKernel && maxBlocks_ == rules::kCannotFit) {
    plan.route = noKernelRoute();
    plan.reason = "the ranks sharing a GPU cannot all have kernel blocks resident";
  }
  if (plan.route == algo::GpuRoute::kKernel && !coalescing_ &&
      workspaceOrNull(algo::gpuCollectiveName(collective)) == nullptr) {
    plan.route = noKernelRoute();
    plan.reason = "CUDA IPC between the group's GPUs is not possible (warned when decided)";
  }
  if (coalescing_) {
    plan.route = algo::GpuRoute::kVendor;
    plan.reason = "inside a coalesced batch, which the vendor library runs";
  }
  XCCL_DEBUG("backend", algo::gpuCollectiveName(collective), " ", bytes, " B: ",
             algo::gpuRouteName(plan.route), " ", plan.name, " (", plan.reason, ")");
  return plan;
}

// algo::planGpu is pure in (request, topology, tunables) and only the call's part of the request
// varies within a group, so its plans (with their reason text) are computed once per distinct
// call shape: training repeats the same few sizes, and a hit costs one hash lookup instead of the
// planner's string building (issue order is kept: callers hold no lock across planning).
algo::GpuPlan GpuPath::cachedPlan(algo::GpuCollective collective, size_t bytes, DataType dtype,
                                  ReduceOp op, bool evenSplits) {
  const PlanKey key{bytes, static_cast<uint8_t>(collective), static_cast<uint8_t>(dtype),
                    static_cast<uint8_t>(op), evenSplits};
  std::lock_guard<std::mutex> guard(planMutex_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  algo::GpuRequest request;
  request.collective = collective;
  request.bytes = bytes;
  request.dtype = dtype;
  request.op = op;
  request.evenSplits = evenSplits;
  request.worldSize = group_.getSize();
  request.hosts = placement_.hosts;
  request.ranksPerGpu = placement_.ranksPerGpu;
  request.gpus = placement_.gpus;
  algo::GpuPlan plan = algo::planGpu(request, thisMachine(), tunables_);
  if (plans_.size() >= kMaxCachedPlans) plans_.clear();  // bounded: a sweep over many sizes
  plans_.emplace(key, plan);
  return plan;
}

// all_gather, reduce_scatter and all_to_all run in one launch: a per-rank input larger than
// the workspace goes where the plan would send it without a kernel.
algo::GpuPlan GpuPath::fitWorkspace(algo::GpuPlan plan, size_t inputBytes) const {
  if (plan.route != algo::GpuRoute::kKernel || inputBytes <= workspaceBytes()) return plan;
  plan.route = noKernelRoute();
  plan.reason = "input exceeds the GPU workspace (XCCL_GPU_WORKSPACE_BYTES)";
  XCCL_DEBUG("backend", inputBytes, " B input exceeds the GPU workspace (", workspaceBytes(),
             " B): ", algo::gpuRouteName(plan.route));
  return plan;
}

// A vendor plan for something the vendor library lacks runs through host memory instead.
algo::GpuPlan GpuPath::vendorOrHost(algo::GpuPlan plan, bool vendorCan) {
  if (plan.route == algo::GpuRoute::kVendor && !vendorCan) {
    plan.route = algo::GpuRoute::kHost;
    plan.reason = "NCCL/RCCL have no such reduction";
  }
  return plan;
}

// NCCL refuses ranks that share a GPU: host memory is what is left to them.
algo::GpuRoute GpuPath::noKernelRoute() const {
  return placement_.ranksPerGpu > 1 ? algo::GpuRoute::kHost : algo::GpuRoute::kVendor;
}

size_t GpuPath::workspaceBytes() {
  static const size_t bytes = static_cast<size_t>(env::getInt("XCCL_GPU_WORKSPACE_BYTES"));
  return bytes;
}

}  // namespace xccl::backend
