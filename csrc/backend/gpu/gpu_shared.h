// What more than one part of the GPU side uses (gpu_path.h lists the parts): GpuPath owns one
// GpuShared, fills in what its constructor establishes (the placement, the error word, the event
// pool, the stream order) and lends it to every part. It holds state, not decisions: each part
// says which of these it reads or takes.
//
// Why these are shared and not one part's:
//  - the error word: every call of every route checks it first, and every Work carries it (a
//    failed group never reports success); the kernels and the kernel session set it;
//  - the event pool: the kernel route's completions, the host and local routes' Works, the stream
//    order's waits and the shutdown drain all take their events from it;
//  - the comm stream and the stream order: calls of every route are ordered against each other
//    (gpu_order.h), and the comm stream is where the kernel route runs and what the order waits on;
//  - issueMutex: one call of any route enqueues at a time;
//  - resourceMutex: one lock over the two lazily created resources (below).
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <mutex>
#include <type_traits>

#include "algo/tunables.h"
#include "backend/core/side.h"
#include "backend/gpu/gpu_error.h"
#include "backend/gpu/gpu_events.h"
#include "backend/gpu/gpu_order.h"
#include "backend/gpu/gpu_placement.h"
#include "backend/gpu/gpu_stream.h"

namespace xccl::backend {

class GroupCore;

// Whether the group's device's current stream is capturing a CUDA graph (the group's device,
// whatever device is current: its current stream is the one the call uses).
inline bool capturing(int device) {
  return currentStreamCapturing(static_cast<c10::DeviceIndex>(device));
}

// One call as both the vendor group (a c10d::Backend) and the CPU side spell it: Side mirrors
// c10d::Backend's names and signatures, so one generic lambda, [&](auto& b) { return
// b.allreduce(tensors, opts); }, serves the vendor route and the host route alike.
struct LibraryCall {
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, LibraryCall>>>
  LibraryCall(const F& f) : onVendor(f), onHost(f) {}  // NOLINT(google-explicit-constructor)
  std::function<c10::intrusive_ptr<c10d::Work>(c10d::Backend&)> onVendor;
  std::function<c10::intrusive_ptr<c10d::Work>(Side&)> onHost;
};

struct GpuShared {
  GpuShared(GroupCore& owner, int gpu, algo::Tunables groupTunables)
      : group(owner),
        device(gpu),
        comm(gpuStreamFromPool(/*isHighPriority=*/true, gpu)),
        tunables(std::move(groupTunables)) {}
  GpuShared(const GpuShared&) = delete;
  GpuShared& operator=(const GpuShared&) = delete;

  // The GPU side's device, where every tensor of its calls must be (tensor_args.h).
  c10::Device home() const { return c10::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)); }
  // Raises DistBackendError once the error word is set (every call, every route).
  void checkHealthy(const char* op) const { error->throwIfSet(op); }

  GroupCore& group;
  const int device;
  GpuStream comm;  // the kernel route's stream
  const algo::Tunables tunables;  // the group's
  Placement placement;  // set by GpuPath's constructor, read only from then on
  // Declaration order is destruction order reversed: the stream order (which holds pool events)
  // goes before the event pool, the pool before the error word, and GpuShared itself after every
  // part (GpuPath declares it first), so that nothing a part may still use is freed under it.
  std::shared_ptr<ErrorWord> error;
  std::shared_ptr<EventPool> events;
  // One call at a time enqueues (launch order must match across ranks); timed so that shutdown
  // stays bounded while a host-route call holds it.
  std::timed_mutex issueMutex;
  std::unique_ptr<StreamOrder> order;  // under issueMutex
  // Guards the two lazily created resources and what their creation found out: the kernel
  // session's workspace (its attempt count, why CUDA IPC was refused) and the vendor route's
  // group (whether it was tried). One lock for both, as the GPU side always had: the route choice
  // reads the two facts in one critical section, a workspace creation or a shutdown's drain holds
  // it throughout (so a vendor group creation or abort() waits for them). Holding it, nothing
  // takes issueMutex (the other order, issueMutex then this, is the one shutdown takes).
  std::mutex resourceMutex;
};

}  // namespace xccl::backend
