// HostRoute: the host route (a part of the GPU side, gpu_path.h): the call on the group's CPU
// side with host copies of its tensors, the outputs copied back on the caller's stream. The way
// left when ranks share a GPU (NCCL refuses them) and no kernel runs the call, for bitwise
// reductions, and in a torch without NCCL/RCCL; the caller blocks until it is done.
//
// Shared state it takes (gpu_shared.h): issueMutex and the stream order (the caller's stream
// follows the group's earlier calls first), the event pool (its Work's event), the error word
// (carried by its Work).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <vector>

#include "backend/core/side.h"
#include "backend/gpu/gpu_shared.h"

namespace xccl::backend {

class HostRoute {
 public:
  // `cpu` is the group's CPU side; it outlives the GPU side (gpu_side.h, makeGpuSide).
  HostRoute(GpuShared& shared, Side& cpu) : shared_(shared), cpu_(cpu) {}
  HostRoute(const HostRoute&) = delete;
  HostRoute& operator=(const HostRoute&) = delete;

  // `call` on the CPU side with every tensor in `args` (all the call reads or writes) replaced by
  // a host copy while it runs, and `outputs` (a subset of args) copied back. Refused during CUDA
  // graph capture.
  c10::intrusive_ptr<c10d::Work> run(const char* op, const LibraryCall& call,
                                     const std::vector<at::Tensor*>& args,
                                     const std::vector<at::Tensor*>& outputs);

 private:
  GpuShared& shared_;
  Side& cpu_;
};

}  // namespace xccl::backend
