// What the GPU side (gpu_path.cc and its parts) does with the planner's decisions (algo/gpu_plan.h
// decides; the grid cap and the all_to_all kernel rule are there too), in pure functions that need
// neither CUDA nor torch, unit-tested on CPU (tests/cpp/backend).
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
#include "kernels/launch_checks.h"

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
