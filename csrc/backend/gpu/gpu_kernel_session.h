// KernelSession: the kernel route's life on this rank (a part of the GPU side, gpu_path.h): the
// workspace (created on first use, a collective step, or refused for the group), the device
// handle the kernels get, one kernel-route call on the comm stream (its number, its in-flight
// tensors, its Work handed to the watchdog), and the end of it all (drain, done agreement, free).
//
// Shared state it takes (gpu_shared.h): the error word (sets it when a call or the creation
// fails; the kernels mirror into it), the comm stream, the event pool (the drain's event),
// issueMutex and the stream order (each call), resourceMutex (the workspace and what its creation
// found out, under it).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/gpu/gpu_events.h"
#include "backend/gpu/gpu_route_counter.h"
#include "backend/gpu/gpu_shared.h"
#include "backend/gpu/gpu_watchdog.h"
#include "kernels/launch.h"
#include "net/regions/cuda_ipc/workspace.h"

namespace xccl::backend {

class KernelSession {
 public:
  using Workspace = net::cuda_ipc::Workspace;

  KernelSession(GpuShared& shared, RouteCounter& counts);
  KernelSession(const KernelSession&) = delete;
  KernelSession& operator=(const KernelSession&) = delete;

  // Creates the watchdog; GpuPath's constructor calls it once, after the error word exists.
  void start();
  // At creation, before any call plans: the ranks agreed that CUDA IPC cannot work for this
  // group (`why`, e.g. a MIG instance), so no workspace is ever created.
  void refuseIpc(std::string why);
  // Whether CUDA IPC was refused; with shared.resourceMutex held (the route choice reads it
  // beside the vendor route's availability, in one critical section).
  bool ipcRefusedLocked() const { return !ipcRefused_.empty(); }

  // The workspace, created on first use; nullptr once the ranks agreed that CUDA IPC cannot work
  // for this group (warned once; the route choice then plans without kernels).
  Workspace* workspaceOrNull(const char* op);
  kernels::DeviceHandle handle(Workspace& ws) const;
  void copyIn(Workspace& ws, const void* src, size_t bytes);
  // One kernel-route call: `body` enqueues copies and launches on the comm stream; `keep`
  // (inputs, outputs, a device factor) stays referenced until the call's event completed.
  c10::intrusive_ptr<c10d::Work> runKernel(c10d::OpType type, const char* op,
                                           std::vector<at::Tensor> keep,
                                           const std::function<void(Workspace&)>& body);

  // The kernel route's part of GpuSide::shutdown, by `deadline`, called once by GpuPath with
  // shared.issueMutex held when it could be taken: waits (bounded) for this rank's kernels and
  // for every rank to be done with the workspace, then frees it (else keeps it, and what kernels
  // may still write, until the process exits); stops the watchdog.
  void shutdown(std::chrono::steady_clock::time_point deadline);

 private:
  // The one place the workspace is created (a collective step): a call can switch to another
  // creation (e.g. one all ranks agree on) here.
  Workspace& workspace(const char* op);
  // Sets the abort bit and waits (bounded) for the comm stream; true when it drained.
  bool drainComm(std::chrono::steady_clock::time_point deadline);

  GpuShared& shared_;
  RouteCounter& counts_;
  // XCCL_GPU_BLOCKING_WAIT: whether a kernel-route Work's wait() waits for its call's outcome.
  const bool blockingWait_;
  uint64_t kernelCalls_ = 0;  // kernel-route calls issued, under issueMutex (names them in errors)
  // Declaration order is destruction order reversed, and these three keep the order they had
  // in GpuPath: the in-flight tensors go first (shutdown() saw the comm stream drain, or leaked
  // them), then the workspace (shutdown() freed or leaked it: a peer may still map it), then the
  // watchdog, which outlives both so that while its thread may run, what the calls it watches
  // use is still there (shutdown() stops it; ~Watchdog stops it too if a shutdown was cut short).
  std::unique_ptr<Watchdog> watchdog_;  // settles kernel-route Works (gpu_watchdog.h)
  std::unique_ptr<Workspace> workspace_;  // under shared.resourceMutex, as are the next two
  int workspaceAttempt_ = 0;  // createAgreed attempts so far, alike on every rank
  std::string ipcRefused_;  // why the ranks refused CUDA IPC; "" while not refused
  std::unique_ptr<InFlight> inFlight_ = std::make_unique<InFlight>();  // leaked if undrained
};

}  // namespace xccl::backend
