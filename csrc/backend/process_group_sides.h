// Sides: the face's two sides (core/side.h) and the choice between them. Every collective and
// point-to-point call runs on the side its tensors pick (on()): the GPU side when any of them is
// a CUDA tensor, else the CPU side (cpu/cpu_side.h). The CPU side is built with each membership
// (buildCpu()); the GPU side (core/gpu_side.h) by the first call on CUDA tensors, which is a
// collective step (every rank's first CUDA call creates it), and it lives until the membership
// ends (shutdownGpu()). A coalesced batch spans both sides: the core's batch
// (core/group_core_batch.h) collects CPU Works and calls the GPU side through the callbacks
// gpu() lends it.
//
// One reason to change: how a call reaches a side. Threads: any; gpuMutex_ guards gpu_. cpu_
// changes only with the membership (buildCpu()), with no operation in flight.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>
#include <mutex>
#include <vector>

#include "backend/core/gpu_side.h"
#include "backend/core/group_core.h"
#include "backend/core/side.h"
#include "backend/core/torch_error.h"
#include "backend/cpu/cpu_side.h"

namespace xccl::backend {

class Sides {
 public:
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;

  // The sides hold references to `core`, which must outlive them.
  explicit Sides(GroupCore& core) : core_(core) {}
  Sides(const Sides&) = delete;
  Sides& operator=(const Sides&) = delete;

  // A new CPU side for the membership just built (or for a group without members yet); the last
  // membership's goes. Not thread-safe: called with no operation in flight.
  void buildCpu() { cpu_ = std::make_unique<CpuSide>(core_); }
  // The CPU side, for the calls only it serves (barrier, sparse and compressed all_reduce).
  CpuSide& cpu() { return *cpu_; }

  // Runs `call` (Side& -> Work) on the side a call on `tensors` goes to: the GPU side when any
  // of them is a CUDA tensor (gpuTensors()), else the CPU side. `opName` names the call in a
  // refusal. The GPU side throws xccl::Error (a failed CUDA call, its workspace's setup):
  // converted here, once, for every call a CUDA tensor takes. The CPU side's calls convert
  // their own.
  template <typename Call>
  WorkPtr on(const std::vector<at::Tensor*>& tensors, const char* opName, Call&& call) {
    if (!gpuTensors(tensors)) return call(static_cast<Side&>(*cpu_));
    return torchErrors([&] { return call(static_cast<Side&>(gpu(tensors, opName))); });
  }

  // Coalesced batches across both sides (core/group_core_batch.cc; gpu() joins the GPU side).
  void startCoalescing() { core_.batch().start(); }
  WorkPtr endCoalescing() { return core_.endCoalescing(); }

  // abort() on the GPU side, if there is one.
  void abortGpu();
  // Ends the membership's GPU side, if there is one: shuts it down (bounded by the group's
  // timeout, at most 30 s) and destroys it, so that the next membership's first CUDA call
  // builds a new one. Call with the GIL released: the shutdown waits for the GPU side's threads.
  void shutdownGpu();
  // The GPU side's calls per route (gpu_side.h); all zero before its first CUDA call.
  GpuRouteCounts gpuRouteCounts();

 private:
  // The GPU side, created by the first collective on CUDA tensors; opens its batch when the
  // call starts a coalesced one.
  GpuSide& gpu(const std::vector<at::Tensor*>& tensors, const char* opName);
  static bool gpuTensors(const std::vector<at::Tensor*>& tensors);

  GroupCore& core_;
  // The GPU side calls the CPU side (host route): declared after it, destroyed first.
  std::unique_ptr<CpuSide> cpu_;
  std::mutex gpuMutex_;
  std::unique_ptr<GpuSide> gpu_;
};

}  // namespace xccl::backend
