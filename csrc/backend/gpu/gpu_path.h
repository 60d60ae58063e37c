// The GPU side for CUDA builds (core/gpu_side.h): routes each call on CUDA tensors and runs the
// route. GpuPath is the face; the work is done by named parts, each a class with one reason to
// change, and GpuPath keeps only what spans them:
//   RouteChoice (gpu_route_choice.h): which route a call takes: the group's part of the request
//     to algo::planGpu, the plan cache, creating what a plan needs (and planning again), the
//     launch shape.
//   KernelSession (gpu_kernel_session.h): the kernel route: the workspace (creation, device
//     handle, copies into it), one kernel-route call on the comm stream, the in-flight tensors,
//     the watchdog (gpu_watchdog.h), kernel call numbering; drain and release at shutdown.
//   VendorRoute (gpu_vendor_route.h): the inner NCCL/RCCL group: its creation, its calls, the
//     capture rule, coalesced batches (an NCCL group), its shutdown and abort.
//   HostRoute (gpu_host_route.h): a call through host memory on the CPU side.
//   LocalRoute (gpu_local_route.h): world size 1.
//   KernelVerification (gpu_verify.h): whether the group may use the kernels (verified on this
//     machine, time-sliced shared GPU, MIG), agreed at creation; XCCL_GPU_VERIFY's comparison.
//   RouteCounter (gpu_route_counter.h): the calls per route (GpuRouteCounts).
// What several parts use (the error word, the event pool, the comm stream, the stream order, the
// issue and resource locks, the placement) is one GpuShared (gpu_shared.h), which GpuPath owns and
// lends to the parts. GpuPath itself holds: creation (the collective steps, in their order), the
// operations of Side (checking arguments, planning, handing each call to its route: the five
// collectives with a kernel in gpu_path.cc, the others in gpu_path_without_kernel.cc, through
// withoutKernel and other(), the door to the vendor and host routes that also closes a batch a
// call cannot join), shutdown and abort (each part's share, in order), and routeCounts().
// Helpers outside the parts: core/tensor_args (argument checks, shared with the CPU side),
// gpu_placement (who is where), gpu_order (issue order across routes and graph replays),
// gpu_events (event pool, in-flight tensors), gpu_error (the mapped error word), gpu_rules (the
// decisions that need neither CUDA nor torch).
//
// Kernel route, per call: the comm stream waits on the caller's current stream (and on earlier
// calls of other routes, gpu_order.h); on the comm stream the input is copied into this rank's
// workspace buffer (the memory peers read through CUDA IPC), the kernel runs and writes the
// caller's output; an event recorded after it completes the GpuWork. Messages larger than the
// workspace run in chunks where the collective is elementwise (all_reduce, broadcast); the others
// go to the vendor library (or host memory when ranks share a GPU) above the workspace size
// (planGpu's rule).
//
// Locks (gpu_shared.h says what each guards): shared.issueMutex (one call of any route enqueues
// at a time) and shared.resourceMutex (the workspace and the vendor group, created lazily), taken
// in that order when nested (endCoalescing, shutdown), never the other way; RouteChoice's plan
// cache lock, always taken alone.
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "algo/gpu_plan.h"
#include "backend/core/gpu_side.h"
#include "backend/core/tensor_args.h"
#include "backend/gpu/gpu_host_route.h"
#include "backend/gpu/gpu_kernel_session.h"
#include "backend/gpu/gpu_local_route.h"
#include "backend/gpu/gpu_route_choice.h"
#include "backend/gpu/gpu_route_counter.h"
#include "backend/gpu/gpu_shared.h"
#include "backend/gpu/gpu_vendor_route.h"
#include "backend/gpu/gpu_verify.h"

namespace xccl::backend {

class GroupCore;

class GpuPath final : public GpuSide {
 public:
  GpuPath(GroupCore& group, Side& cpu, int device);
  ~GpuPath() override;

  // Side's operations (side.h). gpu_path.cc defines the five with a kernel (kernel, vendor or
  // host route): broadcast, allreduce, allgather_into_tensor_coalesced (the kernel for one pair;
  // the coalesced form takes the vendor or host route), reduce_scatter_tensor_coalesced (likewise)
  // and alltoall_base; gpu_path_without_kernel.cc the others (vendor or host route).
  XCCL_SIDE_OPERATIONS(XCCL_SIDE_OVERRIDE)

  // Coalesced batches run on the vendor group (VendorRoute).
  void startCoalescing(const char* op) override { vendor_.startBatch(op); }
  c10::intrusive_ptr<c10d::Work> endCoalescing() override { return vendor_.endBatch(); }
  bool coalescing() const override { return vendor_.batchOpen(); }
  void shutdown(std::chrono::milliseconds timeout) override;
  void abort() override;
  GpuRouteCounts routeCounts() const override { return counts_.counts(); }

 private:
  using Workspace = KernelSession::Workspace;

  // The GPU side's device, where every tensor of its calls must be (tensor_args.h).
  c10::Device home() const { return shared_.home(); }
  // gpu_path.cc: the kernel collectives on one pair of tensors.
  WorkPtr allgatherBase(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts);
  WorkPtr reduceScatterBase(at::Tensor& output, at::Tensor& input,
                            const c10d::ReduceScatterOptions& opts);
  // gpu_path_without_kernel.cc: a call with no kernel. `call` runs on the vendor group when it
  // can serve this group and `vendorCan` (false for what NCCL lacks, e.g. bitwise reductions);
  // otherwise on the CPU side with every tensor in `args` (all the call reads or writes) replaced
  // by a host copy while it runs, and `outputs` (a subset of args) copied back.
  WorkPtr withoutKernel(const char* op, const LibraryCall& call,
                        const std::vector<at::Tensor*>& args,
                        const std::vector<at::Tensor*>& outputs, bool vendorCan = true);
  // gpu_path_without_kernel.cc: the vendor or host route, as planned, counted; a call that cannot
  // join an open batch (any route but the vendor's) closes it first and raises a ValueError.
  WorkPtr other(const char* op, algo::GpuRoute route, const char* reason, const LibraryCall& call,
                const std::vector<at::Tensor*>& args, const std::vector<at::Tensor*>& outputs);

  // Declaration order is destruction order reversed (~GpuPath runs shutdown() first). Each part
  // refers only to members declared before it, so it is built after and destroyed before what it
  // uses. Beyond that:
  //  - shared_ is destroyed last: the stream order, the event pool and the error word outlive
  //    every part that may still use them (gpu_shared.h);
  //  - inside the kernel session the in-flight tensors, then the workspace, then the watchdog are
  //    destroyed, as before the split (gpu_kernel_session.h says why);
  //  - the vendor route's group (shut down by shutdown()) is destroyed before the session's
  //    in-flight tensors are let go (before the split, right after them): those are the kernel
  //    route's tensors, whose calls shutdown() saw end or leaked, and neither depends on the other.
  GpuShared shared_;
  std::atomic<bool> shutDown_{false};  // shutdown() runs once
  RouteCounter counts_;
  KernelSession session_;
  VendorRoute vendor_;
  HostRoute host_;
  LocalRoute local_;
  KernelVerification verification_;
  RouteChoice choice_;
};

}  // namespace xccl::backend
