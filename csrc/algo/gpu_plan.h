// Selection on GPUs: which of xccl's GPU kernels (kernels/launch.h) runs a collective, or whether
// it goes to the vendor library (NCCL/RCCL through an inner ProcessGroupNCCL) or, where neither
// can, through host memory and the CPU algorithms.
//
// A pure function of (request, topology of this host, tunables) -> plan, unit-tested on the
// fixture machines (tests/cpp/algo/test_gpu_plan.cc). Every rule and threshold, and where each
// number comes from, is in docs/algorithms.md ("Selection on GPUs"). No xccl measurement on
// multi-GPU hardware exists yet: the thresholds are published figures and α-β estimates,
// marked as such below, to be replaced by measurements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/types.h"
#include "common/gpu_limits.h"
#include "topo/topology.h"

namespace xccl::algo {

enum class GpuCollective : uint8_t {
  kAllReduce,
  kReduce,  // no GPU kernel
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kAllToAll,
};

// The kernels of kernels/launch.h, by the launcher and algorithm that run them.
enum class GpuKernel : uint8_t {
  kNone,                   // the plan does not run a kernel
  kOneShotAllReduce,       // launchAllReduce, Algorithm::kOneShot
  kTwoShotAllReduce,       // launchAllReduce, Algorithm::kTwoShot
  kAllPairsAllGather,      // launchAllGather
  kAllPairsReduceScatter,  // launchReduceScatter
  kAllPairsAllToAll,       // launchAllToAll
  kBroadcast,              // launchBroadcast
};

enum class GpuRoute : uint8_t {
  kKernel,  // one of xccl's kernels over CUDA/HIP IPC peer buffers
  kVendor,  // NCCL (RCCL on AMD) through the backend's inner ProcessGroupNCCL
  kHost,    // copy to host memory and run the CPU algorithms: the only way left when ranks share
            // a GPU (which NCCL refuses) and no kernel can run the request
};

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
  int worldSize = 1;
  int hosts = 1;  // distinct hosts among the ranks
  // The most ranks that share one GPU (1: every rank has its own). NCCL refuses shared GPUs
  // ("Duplicate GPU detected", NCCL src/init.cc); the kernels allow them.
  int ranksPerGpu = 1;
  // Topology indices of the GPUs this host's ranks use. Empty: every GPU of the topology, so the
  // slowest pair of the whole machine decides (pass the real set: 2 GPUs under one PCIe switch
  // of a 4-GPU box can use kernels, the whole box cannot).
  std::vector<int> gpus;
};

// A collective's size limits on one fabric. all_reduce runs one-shot below oneShotBelow4 with
// 3-4 ranks or below oneShotBelow8 with 5-8 ranks, two-shot above; with 2 ranks always one-shot
// (both algorithms move S bytes per rank over the one link; one-shot has one barrier fewer, so
// vLLM does the same). A message larger than its *MaxBytes is delegated to the vendor library,
// except when ranks share a GPU (never delegated).
struct FabricLimits {
  size_t oneShotBelow4;
  size_t oneShotBelow8;
  size_t allReduceMaxBytes;
  size_t allPairsMaxBytes;  // all_gather, reduce_scatter, all_to_all
  size_t broadcastMaxBytes;
};

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;
constexpr size_t kNoLimit = SIZE_MAX;

// vLLM's custom all-reduce on fully connected NVLink (NVSwitch or mesh): one-shot when
// W <= 4 and S < 512 KB, or W <= 8 and S < 256 KB. The α-β estimate on 8xH200 (450 GB/s per
// direction, a few µs per barrier) puts the crossover at 256-512 KB too.
constexpr size_t kNvlinkOneShotBelow4 = 512 * kKiB;
constexpr size_t kNvlinkOneShotBelow8 = 256 * kKiB;
// Largest message vLLM hands to its copy-based kernels by default (max_size 8 MiB; NCCL above).
// On NVSwitch NCCL's NVLS reduces in the switch: ≈275 GB/s algbw (≈481 GB/s busbw) at 1 GB on
// 8xH100 (MSCCL++ charts), above the ≈257 GB/s algbw that a copy-based two-shot can reach on
// 450 GB/s links at W=8. The crossover between 8 MiB and 1 GB is an estimate awaiting
// measurement on a GPU.
constexpr size_t kNvlinkKernelMaxBytes = 8 * kMiB;
// Broadcast kernel on NVSwitch: the root's one port carries (W-1)·S while NCCL's pipelined ring
// sends S; α-β estimate (450 GB/s, ≈2 µs per pipeline step at W=8): the kernel's extra 6·S/B
// exceeds the ring's ≈7 steps near 1 MiB. Estimate awaiting measurement.
constexpr size_t kNvswitchBroadcastMaxBytes = 1 * kMiB;
// aiter's custom all-reduce on MI300X: one-shot when W <= 4 and S < 160 KB, or W <= 8 and
// S < 80 KB.
constexpr size_t kXgmiOneShotBelow4 = 160 * kKiB;
constexpr size_t kXgmiOneShotBelow8 = 80 * kKiB;
// QuickReduce's unquantised FP16 two-shot against RCCL 2.20.5 on MI300X (QuickReduce README):
// faster at 1 MB for 2/4/8 GPUs (28.8/21.9/20.0 vs 37.2/39.4/26.4 µs), slower at 8 MB for 4 and
// 8 GPUs (132.5/90.3 vs 115.7/83.1 µs). 4 MiB sits between; an estimate awaiting measurement.
constexpr size_t kXgmiAllReduceMaxBytes = 4 * kMiB;
// All-pairs on a full xGMI mesh drives all W-1 links at once; RCCL's rings leave most idle
// ("when using less than 8 GPUs, one can only achieve a fraction of the potential bandwidth";
// 8xMI300X RCCL all-reduce ≈275 GB/s busbw of the 448 GB/s the seven links carry:
// RCCL README, QuickReduce README). No size limit until a measurement shows one.
constexpr size_t kXgmiAllPairsMaxBytes = kNoLimit;
// Two GPUs under one PCIe switch: vLLM runs its kernels on 2 PCIe GPUs (TP2 on A30/T4 sped up
// end to end) and never on more. The 1 MiB limit is an estimate awaiting measurement: both
// sides move S bytes at W=2, the kernel saves NCCL's pipeline steps.
constexpr size_t kPcieKernelMaxBytes = 1 * kMiB;

// XCCL_GPU_ALGO. A forced choice applies to the collectives that have it and where it can run
// (one host, at most kGpuMaxRanks ranks, a kernel for the dtype and op, peer access between
// the GPUs); everything else is planned as usual.
enum class GpuForce : uint8_t {
  kAuto,
  kVendor,    // "nccl" (also "rccl", "vendor"): every collective to the vendor library
  kKernel,    // "kernel": a kernel wherever one can run, whatever the size or fabric policy
  kOneShot,   // "one_shot": all_reduce only
  kTwoShot,   // "two_shot": all_reduce only
  kAllPairs,  // "all_pairs": all_gather, reduce_scatter, all_to_all
};

struct GpuTunables {
  FabricLimits nvswitch{kNvlinkOneShotBelow4, kNvlinkOneShotBelow8, kNvlinkKernelMaxBytes,
                        kNvlinkKernelMaxBytes, kNvswitchBroadcastMaxBytes};
  // Direct links: every peer is pulled over its own link, as on xGMI, so a broadcast is not
  // bound by one port.
  FabricLimits nvlinkMesh{kNvlinkOneShotBelow4, kNvlinkOneShotBelow8, kNvlinkKernelMaxBytes,
                          kNvlinkKernelMaxBytes, kNvlinkKernelMaxBytes};
  FabricLimits xgmiMesh{kXgmiOneShotBelow4, kXgmiOneShotBelow8, kXgmiAllReduceMaxBytes,
                        kXgmiAllPairsMaxBytes, kXgmiAllPairsMaxBytes};
  // Also the one-shot thresholds of mixed fabrics when ranks share GPUs (their slowest pairs are
  // PCIe); vLLM's NVLink values, as vLLM only ever runs W=2 (always one-shot) there.
  FabricLimits pcieSwitch{kNvlinkOneShotBelow4, kNvlinkOneShotBelow8, kPcieKernelMaxBytes,
                          kPcieKernelMaxBytes, kPcieKernelMaxBytes};
  // Ranks on one GPU read each other's buffers from the same HBM; never delegated, so only the
  // one-shot thresholds matter. α-β over HBM (one-shot moves ≈W²·S in total, two-shot ≈3W·S;
  // the difference equals one barrier of a few µs near 0.1-1 MB) agrees with vLLM's values.
  FabricLimits singleGpu{kNvlinkOneShotBelow4, kNvlinkOneShotBelow8, kNoLimit, kNoLimit,
                         kNoLimit};

  GpuForce forced = GpuForce::kAuto;  // XCCL_GPU_ALGO

  static GpuTunables fromEnvironment();
};

struct GpuPlan {
  GpuRoute route = GpuRoute::kVendor;
  GpuKernel kernel = GpuKernel::kNone;  // set when route == kKernel
  GpuFabric fabric = GpuFabric::kUnknown;
  // Short name for logs and tests: "one_shot", "two_shot", "all_pairs", "broadcast", "nccl",
  // "rccl" or "host".
  std::string name;
  std::string reason;  // one line: the rule that decided, with the numbers it compared
};

// Throws kInvalidArgument for a malformed request (world, hosts or ranksPerGpu below 1, more
// hosts than ranks, GPU indices the topology does not have).
GpuPlan planGpu(const GpuRequest& request, const topo::Topology& topology,
                const GpuTunables& tunables);

// The fabric among `gpus` (topology indices; duplicates ignored; empty or one GPU: kSingleGpu).
GpuFabric classifyFabric(const topo::Topology& topology, const std::vector<int>& gpus);

// "" and "auto" are kAuto; throws kInvalidArgument listing the accepted names otherwise.
GpuForce parseGpuForce(const std::string& name);
const char* gpuForceName(GpuForce force);

const char* gpuCollectiveName(GpuCollective collective);
const char* gpuKernelName(GpuKernel kernel);
const char* gpuRouteName(GpuRoute route);
const char* gpuFabricName(GpuFabric fabric);

}  // namespace xccl::algo
