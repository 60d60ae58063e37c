// Issue order of a group's GPU calls across routes and streams (docs/gpu.md, "Streams and Work").
//
// ProcessGroupNCCL runs a group's calls on one NCCL stream, each after the caller's current stream
// as of the call: they take effect in issue order. xccl's calls run on the comm stream (kernel
// route), on the vendor group's NCCL stream, or through host memory; StreamOrder adds the waits
// that give the same guarantee (the decision is rules::orderBefore, tested on CPU):
//  - kernel after vendor: the caller's stream waits on every vendor Work issued since the last
//    kernel-route call (their synchronize(), with the caller's stream current as NCCL expects
//    before it releases the call's tensors; all of them, as collectives and point-to-point calls
//    run on different NCCL streams), and the comm stream waits on the caller's stream as for
//    every kernel-route call;
//  - vendor after kernel: the caller's stream waits on the last kernel-route event; NCCL's stream
//    waits on the caller's stream when the vendor call is issued;
//  - host after either: the caller's stream waits on both; the copies to host memory then
//    synchronise it before the CPU collective runs.
// Graph replays and eager calls share the workspace's flags and epochs, so they must not overlap:
//  - each captured kernel-route call waits (external event wait node) on `eagerTail_`, which every
//    eager kernel-route call records on the comm stream: a replay starts after the eager calls
//    issued before it;
//  - each captured call records `graphTail_` (external event record node) at its end, and every
//    eager call makes the comm stream wait on it: an eager call starts after the replays launched
//    before it. The two events are distinct so that no graph waits on its own record nodes.
//  Both need external event nodes (kGpuGraphExternalEvents: CUDA, and HIP where they exist and
//  work). Without them captured calls keep only the plain record/wait that joins the caller's
//  stream, and replays are ordered with eager calls by the stream they are launched on.
//  Two graphs holding the group's collectives must not be replayed concurrently (as with NCCL,
//  whose communicators also take one stream of work at a time).
// All methods are called by the GPU side's parts with the issue mutex (GpuShared::issueMutex,
// gpu_shared.h) held, on the group's device.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>

#include "backend/gpu/gpu_events.h"
#include "backend/gpu/gpu_rules.h"
#include "backend/gpu/gpu_stream.h"
#include "backend/gpu/gpu_work.h"

namespace xccl::backend {

class StreamOrder {
 public:
  StreamOrder(GpuStream comm, std::shared_ptr<EventPool> pool);

  // Kernel route: before the first enqueue on the comm stream, which then follows the caller's
  // stream and every earlier call of the group.
  void beforeKernel(gpuStream_t current, bool captured);
  // After the last enqueue: the call's completion event. Under capture the caller's stream
  // joins the comm stream (a capture must end on the stream it began on).
  std::shared_ptr<CudaEvent> afterKernel(gpuStream_t current, bool captured);

  // Vendor route: before the call is handed to the vendor group; `afterVendor` with its Work.
  void beforeVendor(gpuStream_t current, bool captured);
  void afterVendor(c10::intrusive_ptr<c10d::Work> work, bool captured);

  // Host route and calls completed on the caller's stream (world size 1): the caller's stream
  // follows every earlier call of the group.
  void beforeCurrentStream(gpuStream_t current, bool captured);

  // Makes the comm stream wait for the graph replays launched so far (for shutdown: replays run
  // on the replaying stream, not on the comm stream).
  void commWaitsReplays();

  // The last eager kernel-route event, or null (for shutdown).
  std::shared_ptr<CudaEvent> lastKernel() const { return lastKernel_; }

 private:
  // Drops state that refers to work the other side of a capture boundary: torch.cuda.graph
  // synchronises the device before it captures, and captured events cannot be used eagerly.
  void crossCaptureBoundary(bool captured);
  bool kernelPending();

  GpuStream comm_;
  std::shared_ptr<EventPool> pool_;
  CudaEvent ready_;  // the caller's stream at a kernel-route call; reused per call
  CudaEvent eagerTail_;  // recorded on the comm stream by every eager kernel-route call
  CudaEvent graphTail_;  // recorded by captured kernel-route calls, at replay
  std::shared_ptr<CudaEvent> lastKernel_;  // eager only
  // Not yet waited on by the comm stream; all eager or all captured (crossCaptureBoundary).
  rules::PendingVendor<c10::intrusive_ptr<c10d::Work>> pendingVendor_;
  bool lastCaptured_ = false;  // whether the previous call was issued under capture
};

}  // namespace xccl::backend
