// The GPU side of ProcessGroupXccl (side.h): what it does with CUDA tensors. Plain C++ (no CUDA
// headers): the implementation (GpuPath, gpu_path.h) exists only in builds with the CUDA parts;
// other builds refuse CUDA tensors with a ValueError that says so.
//
// Every CUDA call takes one of three routes, decided per call by algo::planGpu from the request,
// this host's topology and where the group's ranks and GPUs are (docs/algorithms.md):
//  - kernel: xccl's kernels over the group's CUDA IPC workspace, on an internal comm stream;
//  - vendor: the same call on an inner ProcessGroupNCCL (RCCL on ROCm), created on first use;
//  - host:   copies to host memory, the same call on the group's CPU side, copies back (the
//            caller blocks); the way left when ranks share a GPU (NCCL refuses that) and no
//            kernel runs the request.
// All ranks of a group decide alike: the inputs to the decision are exchanged at creation.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>

#include "backend/core/side.h"

namespace xccl::backend {

class GroupCore;

// The calls that ran on each route, counted where the call takes it (gpu/gpu_route_counter.h:
// KernelSession::runKernel, GpuPath::other for the vendor and host routes, LocalRoute), once per
// call whatever its chunks, and only once its route was issued without an error. The routes give
// the same exact results, so these are the proof that a kernel ran: `python -m xccl doctor --gpu`,
// benchmarks/gpu_bench.py and `python -m xccl tune` read them (xccl._C._gpu_route_counts) before
// claiming the kernel route. Indexed by algo::GpuRoute and named by algo::gpuRouteName.
// XCCL_GPU_VERIFY's reference runs are not calls and are not counted.
struct GpuRouteCounts {
  static constexpr size_t kRoutes = 4;  // kernel, vendor, host, local
  std::array<uint64_t, kRoutes> calls{};
};
// Every GPU side of this process so far (groups destroyed included); each one's RouteCounter
// adds its calls.
GpuRouteCounts processGpuRouteCounts();
void countProcessGpuRoute(size_t route);

// Side's operations on CUDA tensors, plus what only the GPU side has: coalesced batches of its
// own (a CPU batch is a list of Works in GroupCore's CoalescedBatch) and an end that must wait
// for the GPU.
class GpuSide : public Side {
 public:
  // A coalesced batch of CUDA calls (batch_isend_irecv, torch's coalescing manager): every call
  // between the two takes the vendor route and the vendor group runs the batch as one (an NCCL
  // group); endCoalescing returns its Work for the batch. startCoalescing throws a ValueError
  // when this group has no vendor route (ranks share a GPU, or torch has no NCCL/RCCL); a call
  // in the batch that the vendor cannot run (a bitwise reduction) throws a ValueError too, after
  // closing the batch (coalescing() is false from then on: torch never ends a batch whose body
  // raised, and later calls must not join it).
  virtual void startCoalescing(const char* op) = 0;
  virtual c10::intrusive_ptr<c10d::Work> endCoalescing() = 0;
  virtual bool coalescing() const = 0;

  // Waits (bounded) until this rank's GPU work finished and every rank is done with the shared
  // workspace, then releases it. Kernels still spinning after half of `timeout` are aborted
  // (see abort()). Called by shutdown().
  virtual void shutdown(std::chrono::milliseconds timeout) = 0;

  // Makes spinning kernels return and every later call and wait raise DistBackendError; aborts
  // the vendor group. Never blocks on the GPU. Called by abort().
  virtual void abort() = 0;

  // This group's calls per route so far (GpuRouteCounts above).
  virtual GpuRouteCounts routeCounts() const = 0;
};

// Creates the GPU side for the group on `device` (the first CUDA collective's device): a
// collective step (ranks exchange where their GPUs are through the group's store). `cpu` is the
// group's CPU side, which the host route calls; it outlives the GPU side. Throws a ValueError in
// builds without the CUDA parts.
std::unique_ptr<GpuSide> makeGpuSide(GroupCore& group, Side& cpu, int device);

}  // namespace xccl::backend
