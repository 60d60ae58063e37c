#include "algo/gpu_plan.h"

#include <algorithm>

#include "algo/tuning.h"

#include "common/error.h"
#include "common/gpu_limits.h"

namespace xccl::algo {
namespace {

bool isReduction(GpuCollective collective) {
  return collective == GpuCollective::kAllReduce || collective == GpuCollective::kReduce ||
         collective == GpuCollective::kReduceScatter;
}

// The kernel of `collective`: all_reduce's one-shot or two-shot, the others' only one.
GpuKernel kernelFor(GpuCollective collective, bool oneShot) {
  if (collective == GpuCollective::kAllReduce) {
    return oneShot ? GpuKernel::kOneShotAllReduce : GpuKernel::kTwoShotAllReduce;
  }
  for (const vocab::GpuKernelRow& row : vocab::kGpuKernelRows) {
    if (row.id != GpuKernel::kNone && row.collective == collective) return row.id;
  }
  return GpuKernel::kNone;
}

// Whether the forced choice names a kernel of this collective: "kernel" any, the others the
// kernel family of their name (vocabulary.h).
bool forceNamesKernel(GpuForce force, GpuCollective collective) {
  switch (force) {
    case GpuForce::kKernel: return collective != GpuCollective::kReduce;
    case GpuForce::kOneShot:
    case GpuForce::kTwoShot:
    case GpuForce::kAllPairs: {
      GpuKernel kernel = GpuKernel::kNone;
      return vocab::kernelOf(collective, vocab::name(force), &kernel) && kernel != GpuKernel::kNone;
    }
    case GpuForce::kAuto:
    case GpuForce::kVendor: break;
  }
  return false;
}

size_t maxBytesFor(GpuCollective collective, const FabricLimits& limits) {
  switch (collective) {
    case GpuCollective::kAllReduce: return limits.allReduceMaxBytes;
    case GpuCollective::kBroadcast: return limits.broadcastMaxBytes;
    default: return limits.allPairsMaxBytes;
  }
}

const FabricLimits& limitsFor(GpuFabric fabric, const Tunables& tunables) {
  switch (fabric) {
    case GpuFabric::kNvswitch: return tunables.nvswitch;
    case GpuFabric::kNvlinkMesh: return tunables.nvlinkMesh;
    case GpuFabric::kXgmiMesh: return tunables.xgmiMesh;
    case GpuFabric::kSingleGpu: return tunables.singleGpu;
    default: return tunables.pcieSwitch;  // PCIe switch, and mixed fabrics (slowest pairs PCIe)
  }
}

void validate(const GpuRequest& request, const topo::Topology& topology) {
  XCCL_CHECK_ARG(request.worldSize >= 1, "world size must be at least 1, got ", request.worldSize);
  XCCL_CHECK_ARG(request.hosts >= 1 && request.hosts <= request.worldSize, "hosts must be 1..",
                 request.worldSize, ", got ", request.hosts);
  XCCL_CHECK_ARG(request.ranksPerGpu >= 1 && request.ranksPerGpu <= request.worldSize,
                 "ranks per GPU must be 1..", request.worldSize, ", got ", request.ranksPerGpu);
  const int count = static_cast<int>(topology.gpus.size());
  for (int gpu : request.gpus) {
    XCCL_CHECK_ARG(gpu >= 0 && gpu < count, "GPU ", gpu, " is not one of the ", count, " GPUs");
  }
  if (request.hosts == 1 && !request.gpus.empty()) {
    const size_t capacity = request.gpus.size() * static_cast<size_t>(request.ranksPerGpu);
    XCCL_CHECK_ARG(capacity >= static_cast<size_t>(request.worldSize), request.worldSize,
                   " ranks do not fit on ", request.gpus.size(), " GPUs with at most ",
                   request.ranksPerGpu, " per GPU");
  }
}

constexpr const char* kTunedReason =
    "tuned: measured fastest at this size on this machine (tuning table)";

// Builds plans; holds what every rule needs to name its outcome.
class Planner {
 public:
  Planner(const GpuRequest& request, const topo::Topology& topology, const Tunables& tunables,
          const TuningTable* tuning)
      : request_(request),
        topology_(topology),
        tunables_(tunables),
        tuning_(tuning),
        shared_(request.ranksPerGpu > 1),
        forcedKernel_(forceNamesKernel(tunables.gpuForced, request.collective)) {
    gpus_ = request.gpus;
    std::sort(gpus_.begin(), gpus_.end());
    gpus_.erase(std::unique(gpus_.begin(), gpus_.end()), gpus_.end());
    vendor_ = vendorName();
  }

  // What the group found out at run time and the call's context come first and last; the
  // topology, size and forcing rules (byRules) in between.
  GpuPlan plan() {
    const GpuRequest& r = request_;
    if (r.worldSize == 1 && !r.coalescing && vocab::hasKernel(r.collective) &&
        (r.collective != GpuCollective::kAllToAll || r.evenSplits)) {
      return local();
    }
    if (r.coalescing) return reachable(vendor("inside a coalesced batch, which the vendor runs"));
    if (r.collective == GpuCollective::kOther) {
      if (!r.vendorReduces) return host("no kernel, and NCCL/RCCL have no such reduction");
      return reachable(elsewhere("no kernel for this operation"));
    }
    return reachable(runnable(byRules()));
  }

 private:
  GpuPlan byRules() {
    const GpuRequest& r = request_;
    if (tunables_.gpuForced == GpuForce::kVendor) {
      return vendor(std::string("forced by XCCL_GPU_ALGO=") + gpuForceName(tunables_.gpuForced) +
                    (shared_ ? "; NCCL refuses ranks that share a GPU unless "
                               "NCCL_MULTI_RANK_GPU_ENABLE=1 (NCCL >= 2.30)"
                             : ""));
    }
    // What no kernel can do.
    if (r.hosts > 1) {
      return noKernel(detail::concat("spans ", r.hosts,
                                     " hosts; the kernels reach their peers "
                                     "through CUDA/HIP IPC on one host"));
    }
    if (r.collective == GpuCollective::kReduce) return noKernel("no reduce kernel");
    if (r.collective == GpuCollective::kAllToAll && !r.evenSplits) {
      return noKernel("no kernel for uneven all_to_all splits");
    }
    if (isReduction(r.collective) && !gpuKernelReduces(r.dtype, r.op)) {
      return noKernel(detail::concat("no kernel for ", reduceOpName(r.op), " on ",
                                     dataTypeName(r.dtype),
                                     " (float32/float16/bfloat16 with "
                                     "sum, avg, premul_sum, min, max)"));
    }
    if (!isReduction(r.collective) && !gpuKernelCopies(r.dtype)) {
      return noKernel(detail::concat("no kernel for ", dataTypeName(r.dtype)));
    }
    if (r.worldSize > kGpuMaxRanks) {
      return noKernel(detail::concat(r.worldSize, " ranks on one host; the kernels take at most ",
                                     kGpuMaxRanks));
    }
    fabric_ = fabric();
    if (fabric_ == GpuFabric::kUnknown) {
      return noKernel(detail::concat("the topology lists ", topology_.gpus.size(),
                                     " GPUs, not the ones this host's ranks use"));
    }
    if (fabric_ == GpuFabric::kNoPeerAccess) {
      return noKernel("some GPU pair has neither NVLink/xGMI nor a common PCIe switch (no P2P)");
    }
    const FabricLimits& limits = limitsFor(fabric_, tunables_);
    if (!forcedKernel_ && !r.kernelsVerified) {
      return elsewhere("kernels not verified on this machine (python -m xccl doctor --gpu)");
    }
    if (shared_ && r.timeSliced && !forcedKernel_) {
      return host(detail::concat(r.ranksPerGpu,
                                 " ranks share a GPU without MPS: time-sliced, a kernel would "
                                 "wait out whole time slices for its peers (NCCL refuses "
                                 "shared GPUs)"));
    }
    // A measured choice between what can run: never a kernel ruled out above, never a forced one.
    if (tuning_ != nullptr && tunables_.gpuForced == GpuForce::kAuto) {
      const GpuTuningEntry* e = findGpu(*tuning_, r.collective, r.bytes);
      // Ranks sharing a GPU have no vendor route (NCCL refuses them): such an entry is not used.
      if (e != nullptr && (e->route == GpuRoute::kKernel || !shared_)) {
        GpuPlan plan = e->route == GpuRoute::kKernel
                           ? kernel(e->kernel == GpuKernel::kOneShotAllReduce, kTunedReason)
                           : vendor(kTunedReason);
        plan.tuned = e;
        return plan;
      }
    }
    if (shared_) {
      return kernelBySize(limits,
                          detail::concat(r.ranksPerGpu, " ranks share a GPU (NCCL "
                                                        "refuses that), so never delegated"));
    }
    if (forcedKernel_) {
      return kernelBySize(limits, std::string("forced by XCCL_GPU_ALGO=") +
                                      gpuForceName(tunables_.gpuForced));
    }
    // Fabric policy: where the vendor library's topology-aware schedules are the safer choice.
    if (fabric_ == GpuFabric::kMixed) {
      return vendor("links differ between pairs (some over PCIe); the vendor's rings follow "
                    "the fast links");
    }
    if (fabric_ == GpuFabric::kPcieSwitch && gpus_.size() > 2) {
      return vendor(detail::concat(gpus_.size(), " PCIe GPUs; kernels only on 2 (vLLM's rule)"));
    }
    const size_t maxBytes = maxBytesFor(r.collective, limits);
    if (r.bytes > maxBytes) {
      return vendor(detail::concat(formatBytes(r.bytes), " > ", formatBytes(maxBytes), " (",
                                   gpuCollectiveName(r.collective), " kernel limit on ",
                                   gpuFabricName(fabric_), ")"));
    }
    return kernelBySize(limits, detail::concat(formatBytes(r.bytes), " <= ", formatBytes(maxBytes),
                                               " on ", gpuFabricName(fabric_)));
  }

  // A kernel plan the group cannot run after all goes where a plan without a kernel would.
  GpuPlan runnable(GpuPlan plan) const {
    if (plan.route != GpuRoute::kKernel) return plan;
    if (!request_.kernelsFit) {
      return elsewhere("the ranks sharing a GPU cannot all have kernel blocks resident");
    }
    if (request_.ipcRefused) {
      return elsewhere("CUDA IPC between the group's GPUs is not possible (warned when "
                       "decided)");
    }
    // all_gather, reduce_scatter and all_to_all run in one launch: a per-rank input larger than
    // the workspace cannot (all_reduce and broadcast run in workspace-sized chunks).
    const GpuCollective c = request_.collective;
    if (c == GpuCollective::kAllGather || c == GpuCollective::kReduceScatter ||
        c == GpuCollective::kAllToAll) {
      const size_t input = c == GpuCollective::kAllGather
                               ? request_.bytes / static_cast<size_t>(request_.worldSize)
                               : request_.bytes;
      if (input > tunables_.gpuWorkspaceBytes) {
        return elsewhere("input exceeds the GPU workspace (XCCL_GPU_WORKSPACE_BYTES)");
      }
    }
    return plan;
  }

  // A vendor plan the vendor library cannot run goes through host memory.
  GpuPlan reachable(GpuPlan plan) const {
    if (plan.route != GpuRoute::kVendor) return plan;
    if (!request_.vendorReduces) return host("NCCL/RCCL have no such reduction");
    if (!request_.vendorAvailable) return host("this torch has no NCCL/RCCL");
    return plan;
  }

  // Where a call goes without a kernel: the vendor library, or host memory when ranks share a
  // GPU (NCCL refuses that).
  GpuPlan elsewhere(const std::string& why) const { return shared_ ? host(why) : vendor(why); }

  // The fabric among this host's GPUs. Without an explicit set, ranks that all share one GPU
  // need no topology; otherwise the whole machine stands in for the set.
  GpuFabric fabric() {
    if (gpus_.empty() && request_.ranksPerGpu >= request_.worldSize) return GpuFabric::kSingleGpu;
    if (gpus_.empty()) {
      const int needed = (request_.worldSize + request_.ranksPerGpu - 1) / request_.ranksPerGpu;
      if (static_cast<int>(topology_.gpus.size()) < needed) return GpuFabric::kUnknown;
      for (const topo::Gpu& gpu : topology_.gpus) gpus_.push_back(gpu.index);
    }
    return classifyFabric(topology_, gpus_);
  }

  // RCCL on AMD GPUs, NCCL otherwise: what torch's ProcessGroupNCCL wraps on that platform.
  const char* vendorName() const {
    auto isAmd = [](const topo::Gpu& gpu) { return gpu.vendor == topo::GpuVendor::kAmd; };
    const bool amd = gpus_.empty()
                         ? std::any_of(topology_.gpus.begin(), topology_.gpus.end(), isAmd)
                         : isAmd(topology_.gpus[static_cast<size_t>(gpus_.front())]);
    return amd ? vocab::kRcclWord : vocab::kNcclWord;
  }

  // all_reduce: one-shot below the fabric's threshold for this world size, two-shot above; the
  // other collectives have one kernel each.
  GpuPlan kernelBySize(const FabricLimits& limits, const std::string& why) {
    if (request_.collective != GpuCollective::kAllReduce) return kernel(false, why);
    const int world = request_.worldSize;
    if (tunables_.gpuForced == GpuForce::kOneShot || tunables_.gpuForced == GpuForce::kTwoShot) {
      return kernel(tunables_.gpuForced == GpuForce::kOneShot, why);
    }
    if (world <= 2) return kernel(true, why + "; 2 ranks: one-shot at every size");
    const size_t below = world <= 4 ? limits.oneShotBelow4 : limits.oneShotBelow8;
    const bool oneShot = request_.bytes < below;
    return kernel(oneShot,
                  detail::concat(why, "; ", formatBytes(request_.bytes),
                                 oneShot ? " < " : " >= ", formatBytes(below),
                                 " (one-shot limit at ", world <= 4 ? "3-4" : "5-8", " ranks)"));
  }

  GpuPlan kernel(bool oneShot, const std::string& why) {
    GpuPlan plan;
    plan.route = GpuRoute::kKernel;
    plan.kernel = kernelFor(request_.collective, oneShot);
    plan.fabric = fabric_;
    plan.name = vocab::family(plan.kernel);
    plan.reason = why;
    return plan;
  }

  GpuPlan local() const {
    GpuPlan plan;
    plan.route = GpuRoute::kLocal;
    plan.fabric = GpuFabric::kSingleGpu;
    plan.name = vocab::name(GpuRoute::kLocal);
    plan.reason = "one rank: at most a copy or a scaling on the caller's stream";
    return plan;
  }

  GpuPlan host(const std::string& why) const {
    GpuPlan plan;
    plan.route = GpuRoute::kHost;
    plan.fabric = fabric_;
    plan.name = vocab::name(GpuRoute::kHost);
    plan.reason = why;
    return plan;
  }

  GpuPlan vendor(const std::string& why) const {
    GpuPlan plan;
    plan.route = GpuRoute::kVendor;
    plan.fabric = fabric_;
    plan.name = vendor_;
    plan.reason = why;
    return plan;
  }

  // No kernel can run the request: the vendor library, or host memory when ranks share a GPU.
  GpuPlan noKernel(const std::string& why) {
    std::string reason = why;
    if (forcedKernel_) {
      reason +=
          std::string(" (XCCL_GPU_ALGO=") + gpuForceName(tunables_.gpuForced) + " cannot run here)";
    }
    if (!shared_) return vendor(reason);
    return host(detail::concat(reason, "; ", request_.ranksPerGpu,
                               " ranks share a GPU, which NCCL refuses"));
  }

  const GpuRequest& request_;
  const topo::Topology& topology_;
  const Tunables& tunables_;
  const TuningTable* tuning_;
  const bool shared_;
  const bool forcedKernel_;
  std::vector<int> gpus_;  // this host's GPUs, sorted and distinct (filled in by fabric())
  const char* vendor_ = vocab::kNcclWord;
  GpuFabric fabric_ = GpuFabric::kUnknown;
};

}  // namespace

GpuPlan planGpu(const GpuRequest& request, const topo::Topology& topology, const Tunables& tunables,
                const TuningTable* tuning) {
  validate(request, topology);
  return Planner(request, topology, tunables, tuning).plan();
}

uint8_t gpuCallFlags(const GpuRequest& request) {
  return (request.evenSplits ? kEvenSplits : 0) | (request.vendorReduces ? kVendorReduces : 0) |
         (request.coalescing ? kCoalescing : 0) | (request.ipcRefused ? kIpcRefused : 0) |
         (request.vendorAvailable ? kVendorAvailable : 0);
}

void setGpuCallFlags(GpuRequest& request, uint8_t flags) {
  request.evenSplits = (flags & kEvenSplits) != 0;
  request.vendorReduces = (flags & kVendorReduces) != 0;
  request.coalescing = (flags & kCoalescing) != 0;
  request.ipcRefused = (flags & kIpcRefused) != 0;
  request.vendorAvailable = (flags & kVendorAvailable) != 0;
}

int residentBlocksPerSm(int threadsPerBlock, int maxThreadsPerSm, int regsPerSm, int regsPerBlock) {
  if (threadsPerBlock <= 0) return 1;
  const int regsPerThread = std::max(1, std::min(255, regsPerBlock / threadsPerBlock));
  const int byThreads = maxThreadsPerSm / threadsPerBlock;
  const int byRegisters = regsPerSm / (threadsPerBlock * regsPerThread);
  return std::max(1, std::min(byThreads, byRegisters));
}

int sharedGpuMaxBlocks(int blocksPerSm, int smCount, int ranksPerGpu) {
  if (ranksPerGpu <= 1) return kNoCap;
  const int resident = std::max(0, blocksPerSm) * std::max(0, smCount);
  if (resident < ranksPerGpu) return kCannotFit;
  return std::min(kGpuDefaultMaxBlocks, resident / ranksPerGpu);
}

bool kernelAllToAll(int64_t inputRows, int64_t inputNumel, int64_t outputRows, int64_t outputNumel,
                    const std::vector<int64_t>& inputSplits,
                    const std::vector<int64_t>& outputSplits, int worldSize) {
  if (worldSize <= 0 || !inputSplits.empty() || !outputSplits.empty()) return false;
  return inputNumel == outputNumel && inputNumel % worldSize == 0 && inputRows % worldSize == 0 &&
         outputRows % worldSize == 0;
}

}  // namespace xccl::algo
