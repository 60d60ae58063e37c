// Selection on GPUs: which of xccl's GPU kernels (kernels/launch.h) runs a collective, or whether
// it goes to the vendor library (NCCL/RCCL through an inner ProcessGroupNCCL) or, where neither
// can, through host memory and the CPU algorithms.
//
// A pure function of (request, topology of this host, tunables) -> plan, unit-tested on the
// fixture machines (tests/cpp/algo/test_gpu_plan.cc, test_gpu_plan_routes.cc). It is the one
// place that decides a GPU call's route: what the group found out at run time (ranks sharing a
// GPU that cannot all hold kernel blocks, CUDA IPC refused, a coalesced batch open, no vendor
// library in this torch) is part of the request, and the backend's GpuPath only executes.
// Every rule and threshold, and where each number comes from, is in docs/algorithms.md ("Selection
// on GPUs"). No xccl measurement on multi-GPU hardware exists yet: the thresholds are published
// figures and α-β estimates, marked as such below, to be replaced by measurements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algo/tunables.h"
#include "common/gpu_limits.h"
#include "common/types.h"
#include "topo/topology.h"

namespace xccl::algo {

struct GpuTuningEntry;
struct TuningTable;

// The GPU collectives, routes and kernels, with their names and which kernel runs which
// collective: common/vocabulary.h.
using vocab::GpuCollective;
using vocab::GpuKernel;
using vocab::GpuRoute;

// How the GPUs of one host's ranks are connected, as far as the kernels care: can every GPU
// load from every other (peer access), and over what.
enum class GpuFabric : uint8_t {
  kSingleGpu,     // all of this host's ranks on one GPU: "peers" are other processes on it
  kNvswitch,      // every pair through NVSwitch (HGX/DGX H100): one 450 GB/s port per GPU
  kNvlinkMesh,    // every pair a direct NVLink (bridged pairs, small NVLink meshes)
  kXgmiMesh,      // every pair a direct xGMI link (MI300X; the two GCDs of an MI250)
  kMixed,         // every pair reachable, some over NVLink/xGMI and some over one PCIe switch
  kPcieSwitch,    // PCIe only, every pair under a common PCIe switch (PIX/PXB): P2P assumed
  kNoPeerAccess,  // some pair crosses a host bridge or the CPU interconnect without NVLink/xGMI
  kUnknown,       // the topology does not list the GPUs (a VM, a container hiding /sys)
};

struct GpuRequest {
  GpuCollective collective = GpuCollective::kAllReduce;
  // The message in nccl-tests' convention, so that one size means one thing whatever the world
  // size: all_reduce, reduce and broadcast the buffer; all_gather the output; reduce_scatter and
  // all_to_all the input (docs/algorithms.md, "GPU kernels").
  size_t bytes = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;  // all_reduce, reduce, reduce_scatter only
  bool evenSplits = true;        // all_to_all: false for uneven split sizes (no kernel)
  // False for a reduction NCCL/RCCL lack (bitwise and/or/xor): host memory instead of them.
  bool vendorReduces = true;
  // Inside a coalesced batch (startCoalescing .. endCoalescing), which the vendor library runs.
  bool coalescing = false;

  // The group's part, the same for each of its calls.
  int worldSize = 1;
  int hosts = 1;  // distinct hosts among the ranks
  // The most ranks that share one GPU (1: every rank has its own). NCCL refuses shared GPUs
  // ("Duplicate GPU detected", NCCL src/init.cc); the kernels allow them.
  int ranksPerGpu = 1;
  // Topology indices of the GPUs this host's ranks use. Empty: every GPU of the topology, so the
  // slowest pair of the whole machine decides (pass the real set: 2 GPUs under one PCIe switch
  // of a 4-GPU box can use kernels, the whole box cannot).
  std::vector<int> gpus;
  // False when the ranks sharing a GPU cannot all have kernel blocks resident at once
  // (sharedGpuMaxBlocks below): a kernel would deadlock.
  bool kernelsFit = true;
  // True once the ranks agreed that CUDA IPC cannot work for this group (found out when the
  // first call planned for a kernel created the workspace).
  bool ipcRefused = false;
  // False when this torch has no NCCL/RCCL (torch.distributed.is_nccl_available()).
  bool vendorAvailable = true;
  // Whether xccl's kernels were verified on this machine (GPU model, driver, topology and xccl
  // version: `python -m xccl doctor --gpu` leaves a stamp, or the known-good list names it), as
  // the group agreed at creation (rank 0's answer). False by default: an unverified kernel never
  // runs unless XCCL_GPU_ALGO names it (docs/gpu.md, "Verified kernels").
  bool kernelsVerified = false;
  // Ranks share a GPU (ranksPerGpu > 1) with no MPS control daemon: the driver time-slices their
  // contexts, so a kernel's blocks spin through whole time slices waiting for a peer's blocks
  // (NVIDIA only; AMD runs the queues of several processes concurrently).
  bool timeSliced = false;
};

struct GpuPlan {
  GpuRoute route = GpuRoute::kVendor;
  GpuKernel kernel = GpuKernel::kNone;  // set when route == kKernel
  GpuFabric fabric = GpuFabric::kUnknown;
  // Short name for logs and tests: the kernel's family (vocabulary.h's GpuKernelRow::family),
  // the vendor library (nccl or rccl), or the route's name (host, local).
  std::string name;
  std::string reason;  // one line: the rule that decided, with the numbers it compared
  // The tuning table's entry that decided (its measured numbers for plan rows); null: the rules.
  const GpuTuningEntry* tuned = nullptr;
};

// The request's booleans that vary between the calls of one group, as bits (a set bit: the field
// of that name is true): what a plan cache keys on beside the collective, size, dtype and op.
enum GpuCallFlag : uint8_t {
  kEvenSplits = 1,
  kVendorReduces = 2,
  kCoalescing = 4,
  kIpcRefused = 8,
  kVendorAvailable = 16,
};
uint8_t gpuCallFlags(const GpuRequest& request);
void setGpuCallFlags(GpuRequest& request, uint8_t flags);

// Throws kInvalidArgument for a malformed request (world, hosts or ranksPerGpu below 1, more
// hosts than ranks, GPU indices the topology does not have).
// A measured tuning table (algo/tuning.h; only one made for this group's shape) chooses kernel
// or vendor and one-shot or two-shot where the rules find a kernel possible at all (one host,
// dtype and op, world size, peer access, verified kernels, no time-sliced shared GPU; CUDA IPC,
// resident blocks and the workspace are checked after it as before), unless XCCL_GPU_ALGO
// forces a choice. Ranks sharing a GPU ignore an entry naming the vendor library.
GpuPlan planGpu(const GpuRequest& request, const topo::Topology& topology, const Tunables& tunables,
                const TuningTable* tuning = nullptr);

// The fabric among `gpus` (topology indices; duplicates ignored; empty or one GPU: kSingleGpu).
GpuFabric classifyFabric(const topo::Topology& topology, const std::vector<int>& gpus);

const char* gpuCollectiveName(GpuCollective collective);
const char* gpuKernelName(GpuKernel kernel);
const char* gpuRouteName(GpuRoute route);
const char* gpuFabricName(GpuFabric fabric);

// ---- Grid cap when ranks share a GPU (MPS on NVIDIA, the default on AMD) ----
//
// Every block of every co-located rank spins on flags that other ranks' blocks set: if the GPU
// cannot hold all of them at once, a resident block waits for one that never gets an SM. So the
// ranks of one GPU together may use at most what is resident at once.

// Blocks of `threadsPerBlock` threads that one SM holds at once, whatever registers the compiler
// chose: the kernels are compiled with __launch_bounds__(threadsPerBlock), which lets the compiler
// use up to min(255, regsPerBlock / threadsPerBlock) registers per thread, so assume it did.
// At least 1: a kernel that launches at all has one block resident per SM.
int residentBlocksPerSm(int threadsPerBlock, int maxThreadsPerSm, int regsPerSm, int regsPerBlock);

constexpr int kNoCap = 0;       // LaunchShape::maxBlocks 0: the kernels' default
constexpr int kCannotFit = -1;  // fewer resident blocks than ranks: no kernel may run

// LaunchShape::maxBlocks for a group whose busiest GPU hosts `ranksPerGpu` ranks, on GPUs of which
// the smallest has `smCount` SMs holding `blocksPerSm` blocks each (the minimum over all ranks,
// from the placement exchange, so every rank computes the same cap and launches the same grid).
int sharedGpuMaxBlocks(int blocksPerSm, int smCount, int ranksPerGpu);

// ---- all_to_all_single: when the kernel may run it ----
//
// The kernel moves equal chunks between every pair of ranks, and whether the chunks are equal is
// a property of the whole group: a rank's own split lists can be equal while a peer's are not
// (MoE dispatch with data-dependent splits), so a rank that judged "equal" from its own lists
// would take the kernel route while its peers took NCCL's, and both would hang. Only torch's
// equal form, no split lists at all, promises equal chunks on every rank; so only it runs on the
// kernel, and explicit lists, equal or not, go to NCCL/RCCL. The ranks of one call must pass
// split lists alike, all or none (docs/gpu.md); sizes must divide evenly by the world size.
bool kernelAllToAll(int64_t inputRows, int64_t inputNumel, int64_t outputRows, int64_t outputNumel,
                    const std::vector<int64_t>& inputSplits,
                    const std::vector<int64_t>& outputSplits, int worldSize);

}  // namespace xccl::algo
