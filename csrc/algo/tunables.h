// The tunables of every selection (planCpu in algo/cpu_plan.h, planGpu in algo/gpu_plan.h): one
// struct, read from the environment once per group (Tunables::fromEnvironment) and passed by
// const reference to the planners. Every threshold is named here with where its number comes
// from; the rules that compare against them are in the planners and docs/algorithms.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/vocabulary.h"

namespace xccl::algo {

// The algorithms of the CPU plan (cpu_plan.h) and XCCL_GPU_ALGO's choices, with their names:
// common/vocabulary.h.
using vocab::Algorithm;
using vocab::Collective;
using vocab::GpuForce;

// XCCL_ALGO's names (vocabulary.h's forceable algorithms; "" is auto); throws otherwise (the
// others are chosen, never forced).
Algorithm parseAlgorithm(const std::string& name);
const char* algorithmName(Algorithm algorithm);

// "" and "auto" are kAuto; throws kInvalidArgument listing the accepted names otherwise.
GpuForce parseGpuForce(const std::string& name);
const char* gpuForceName(GpuForce force);

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;
constexpr size_t kNoLimit = SIZE_MAX;

// ---- CPU: the network transport ----

// At or below this many bytes per rank the latency algorithm wins. Measured on loopback TCP
// with 2-4 ranks (benchmarks/RESULTS.md): direct exchange beats the ring up to ~64 KiB.
constexpr size_t kSmallMessageBytes = 64 * kKiB;
// Ring pipelining unit: large enough to amortise a frame and a wake-up, small enough to
// overlap reduction with transfer (512 KiB was best on loopback TCP).
constexpr size_t kRingChunkBytes = 512 * kKiB;

// ---- CPU: shared memory ----

// One-shot all-reduce: every rank copies its input into its slot and reduces all n slots: one
// step, (2 + n) x bytes through each rank's memory. Two-shot: each rank reduces 1/n of the slots
// into its other slot, then copies the n reduced slices: two steps, (4 + 1/n) x bytes. Two-shot
// therefore saves (n - 2 - 1/n) x bytes (nothing for n = 2) for one extra synchronisation, and
// the message size where it starts to pay falls as n grows.
//
// The threshold at 4 ranks, measured with shm_bench (docs/shm.md) on a 2-vCPU AVX-512 VM under
// load from other jobs: two-shot/one-shot time 1.0-1.2 at 1 MiB, 0.86-1.0 at 2 MiB, 0.70-0.86 at
// 4 MiB; at 3 ranks the crossover is ~4 MiB and at 2 ranks there is none (ratios 0.9-1.4 up to
// 16 MiB), which the traffic model (saving(4) / saving(3) = 2.6) reproduces. Waking a peer is
// expensive on an oversubscribed VM; on hosts with a core per rank the crossover is likely lower
// (DeepSpeed's shm all-reduce switches at 1 MiB): re-measure there with shm_bench.
constexpr size_t kShmTwoShotMinBytes = 2 * kMiB;

// From these many bytes (the whole message; all_gather: its output) each collective reads its
// peers' buffers with process_vm_readv (one copy, docs/shm.md) instead of copying through the
// slots (two, but overlapped on two cores), where the group has the path (Segment::cma()).
// Measured with python -m xccl.bench on a quiet 2-vCPU VM, 2 ranks, float32, ordinary 4 KiB-page
// tensors (benchmarks/RESULTS.md, "Single copy"), single/slots time:
//  - all_reduce: 1.09 at 256 KiB, 0.89 at 1 MiB, 0.73 at 2 MiB, 0.58 at 4 and 16 MiB, 0.71 at
//    32 MiB; 0.65-0.94 from 1 MiB with two CPU-bound processes beside the ranks;
//  - all_gather: 0.68-0.92 from 256 KiB quiet (the smallest size measured), 0.69-0.93 from 1 MiB
//    under load;
//  - broadcast: 1.35-2.15 from 1 MiB (one copy either way, and the slots overlap the root's
//    copy in with the peers' copies out): never;
//  - reduce: 1.2-2.8 (slower) from 128 KiB: the root alone reads and reduces every peer's whole
//    buffer while the others wait, where the slots spread the copies over every rank: never.
// XCCL_SHM_CMA_MIN_BYTES sets them (one number for all four, or per collective).
constexpr size_t kShmCmaAllReduceMinBytes = 1 * kMiB;
constexpr size_t kShmCmaAllGatherMinBytes = 256 * kKiB;
constexpr size_t kShmCmaBroadcastMinBytes = kNoLimit;
constexpr size_t kShmCmaReduceMinBytes = kNoLimit;
// A single-copy all_reduce up to this many bytes reduces its slices through the slots (each rank
// copies its parts of the peers' slices into its slot: a user-space copy) and reads only the
// reduced slices with process_vm_readv; above it, each rank reads the peers' parts of its slice
// with process_vm_readv too. The staged copy wins while it stays in cache and the kernel's copy
// pins every 4 KiB page it reads. Measured with python -m xccl.bench, 2 ranks, quiet 2-vCPU VM
// with 2 MiB of L2 per core, staged/read time: 0.83 at 1 MiB, 0.87 at 2 MiB, 1.05 at 4 MiB,
// 1.09 at 16 MiB, 1.05 at 32 MiB (benchmarks/RESULTS.md).
constexpr size_t kShmCmaStagedReduceMaxBytes = 2 * kMiB;

// The single copy's threshold of each collective that has one (vocab::kShmSingleCopyCollectives);
// kNoLimit: never.
struct ShmCmaMinBytes {
  size_t allReduce = kShmCmaAllReduceMinBytes;
  size_t reduce = kShmCmaReduceMinBytes;
  size_t allGather = kShmCmaAllGatherMinBytes;
  size_t broadcast = kShmCmaBroadcastMinBytes;

  // The threshold of `collective`; kNoLimit for a collective without a single copy.
  size_t of(Collective collective) const;
  // Sets the threshold of `collective`; throws kInternal for one without a single copy.
  void set(Collective collective, size_t bytes);
  // Sets all four alike.
  void setAll(size_t bytes);
};

// ---- GPU ----

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
// Each rank's GPU workspace buffer (XCCL_GPU_WORKSPACE_BYTES's default): what one launch of the
// all-pairs kernels can take as a rank's input (docs/gpu.md).
constexpr size_t kGpuWorkspaceBytes = 32 * kMiB;

// "256 KiB", "8 MiB", "1000 B": sizes as the docs and the plans' reasons write them.
std::string formatBytes(size_t bytes);

struct Tunables {
  // ---- CPU: the network transport (planCpu) ----
  size_t smallMessageBytes = kSmallMessageBytes;  // XCCL_SMALL_MSG_BYTES
  size_t ringChunkBytes = kRingChunkBytes;        // XCCL_RING_CHUNK_BYTES
  Algorithm forced = Algorithm::kAuto;            // XCCL_ALGO or the group's options

  // ---- CPU: shared memory (planCpu) ----
  // The two-shot threshold at 4 ranks, scaled for other world sizes by shmTwoShotThreshold()
  // (cpu_plan.h); XCCL_SHM_TWO_SHOT_BYTES. 0: always two-shot; SIZE_MAX: never.
  size_t shmTwoShotMinBytes = kShmTwoShotMinBytes;
  // Per collective: messages from this many bytes use the single-copy path where the segment
  // has it (Segment::cma()); XCCL_SHM_CMA_MIN_BYTES.
  ShmCmaMinBytes shmCmaMinBytes;

  // ---- GPU (planGpu) ----
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
  FabricLimits singleGpu{kNvlinkOneShotBelow4, kNvlinkOneShotBelow8, kNoLimit, kNoLimit, kNoLimit};
  GpuForce gpuForced = GpuForce::kAuto;            // XCCL_GPU_ALGO
  size_t gpuWorkspaceBytes = kGpuWorkspaceBytes;  // XCCL_GPU_WORKSPACE_BYTES

  // Every field above from its XCCL_* variable (csrc/common/env.cc); throws kInvalidArgument
  // for a malformed value.
  static Tunables fromEnvironment();
};

}  // namespace xccl::algo
