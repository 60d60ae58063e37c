// Decisions of the GPU side (gpu_path.cc and its parts) that need neither CUDA nor torch: pure
// functions of what every rank knows alike, unit-tested on CPU (tests/cpp/backend).
//
// Each one feeds a choice that must be identical on every rank of a group (the grid of a kernel,
// the route of a call) or that orders a group's calls across its three routes; keeping them here
// keeps them out of the code that talks to streams, where no CPU test can reach them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "algo/gpu_plan.h"
#include "common/error.h"
#include "kernels/device_handle.h"
#include "kernels/launch.h"
#include "kernels/plan.h"

namespace xccl::backend::rules {

// ---- The plan's all-reduce kernel as the launcher's algorithm ----
//
// algo's plan names kernels without including them (the layers' rule); the backend maps.
inline kernels::Algorithm allReduceAlgorithm(algo::GpuKernel kernel) {
  if (kernel == algo::GpuKernel::kOneShotAllReduce) return kernels::Algorithm::kOneShot;
  if (kernel == algo::GpuKernel::kTwoShotAllReduce) return kernels::Algorithm::kTwoShot;
  XCCL_THROW(ErrorKind::kInvalidArgument, algo::gpuKernelName(kernel),
             " is not an all-reduce kernel");
}

// ---- Grid cap when ranks share a GPU (MPS on NVIDIA, the default on AMD) ----
//
// Every block of every co-located rank spins on flags that other ranks' blocks set: if the GPU
// cannot hold all of them at once, a resident block waits for one that never gets an SM. So the
// ranks of one GPU together may use at most what is resident at once.

// Blocks of `threadsPerBlock` threads that one SM holds at once, whatever registers the compiler
// chose: the kernels are compiled with __launch_bounds__(threadsPerBlock), which lets the compiler
// use up to min(255, regsPerBlock / threadsPerBlock) registers per thread, so assume it did.
// At least 1: a kernel that launches at all has one block resident per SM.
inline int residentBlocksPerSm(int threadsPerBlock, int maxThreadsPerSm, int regsPerSm,
                               int regsPerBlock) {
  if (threadsPerBlock <= 0) return 1;
  const int regsPerThread = std::max(1, std::min(255, regsPerBlock / threadsPerBlock));
  const int byThreads = maxThreadsPerSm / threadsPerBlock;
  const int byRegisters = regsPerSm / (threadsPerBlock * regsPerThread);
  return std::max(1, std::min(byThreads, byRegisters));
}

constexpr int kNoCap = 0;       // LaunchShape::maxBlocks 0: the kernels' default
constexpr int kCannotFit = -1;  // fewer resident blocks than ranks: no kernel may run

// LaunchShape::maxBlocks for a group whose busiest GPU hosts `ranksPerGpu` ranks, on GPUs of which
// the smallest has `smCount` SMs holding `blocksPerSm` blocks each (the minimum over all ranks,
// from the placement exchange, so every rank computes the same cap and launches the same grid).
inline int sharedGpuMaxBlocks(int blocksPerSm, int smCount, int ranksPerGpu) {
  if (ranksPerGpu <= 1) return kNoCap;
  const int resident = std::max(0, blocksPerSm) * std::max(0, smCount);
  if (resident < ranksPerGpu) return kCannotFit;
  return std::min(kernels::kDefaultMaxBlocks, resident / ranksPerGpu);
}

// ---- all_to_all_single: when the kernel may run it ----
//
// The kernel moves equal chunks between every pair of ranks, and whether the chunks are equal is
// a property of the whole group: a rank's own split lists can be equal while a peer's are not
// (MoE dispatch with data-dependent splits), so a rank that judged "equal" from its own lists
// would take the kernel route while its peers took NCCL's, and both would hang. Only torch's
// equal form, no split lists at all, promises equal chunks on every rank; so only it runs on the
// kernel, and explicit lists, equal or not, go to NCCL/RCCL. The ranks of one call must pass
// split lists alike, all or none (docs/gpu.md); sizes must divide evenly by the world size.
inline bool kernelAllToAll(int64_t inputRows, int64_t inputNumel, int64_t outputRows,
                           int64_t outputNumel, const std::vector<int64_t>& inputSplits,
                           const std::vector<int64_t>& outputSplits, int worldSize) {
  if (worldSize <= 0 || !inputSplits.empty() || !outputSplits.empty()) return false;
  return inputNumel == outputNumel && inputNumel % worldSize == 0 && inputRows % worldSize == 0 &&
         outputRows % worldSize == 0;
}

// ---- Issue order across routes ----
//
// ProcessGroupNCCL runs a group's collectives on one NCCL stream, each after the caller's
// current stream at issue: they take effect in issue order. xccl has three routes (kernel on the
// comm stream, vendor on NCCL's stream, host through host memory); before each call, the steps
// below make it start after the group's previous call, whatever route that took.
enum class Route : uint8_t { kKernel, kVendor, kHost };

struct OrderSteps {
  // The comm stream follows the pending vendor Work (through the caller's stream, which waits).
  bool commWaitsVendor = false;
  bool currentWaitsKernel = false;  // caller's stream waits on the last kernel-route event
  bool currentWaitsVendor = false;  // caller's stream waits on the pending vendor Work
};

// `kernelPending`: a kernel-route call's event may not have completed; `vendorPending`: a vendor
// call ran after the last kernel-route call and the comm stream has not waited on it.
inline OrderSteps orderBefore(Route next, bool kernelPending, bool vendorPending) {
  OrderSteps steps;
  switch (next) {
    case Route::kKernel:
      // The comm stream already follows every earlier kernel call and waits on the caller.
      steps.commWaitsVendor = vendorPending;
      break;
    case Route::kVendor:
      // NCCL's stream waits on the caller's stream at issue, and follows earlier vendor calls.
      steps.currentWaitsKernel = kernelPending;
      break;
    case Route::kHost:
      // The host copies wait for the caller's stream: make it follow both other routes.
      steps.currentWaitsKernel = kernelPending;
      steps.currentWaitsVendor = vendorPending;
      break;
  }
  return steps;
}

// ---- The group's error word ----
//
// The host sets kernels::kErrorAborted in the mapped word (abort(), shutdown with work still
// running); the kernels treat any non-zero word as fatal, so spinning blocks return at their next
// poll (kernels/device_handle.h).
constexpr uint32_t kErrorAborted = kernels::kErrorAborted;

// "" for a healthy word; otherwise what failed, for DistBackendError texts.
inline std::string describeErrorWord(uint32_t word) {
  return word == 0 ? std::string() : kernels::describeDeviceError(word);
}

}  // namespace xccl::backend::rules
