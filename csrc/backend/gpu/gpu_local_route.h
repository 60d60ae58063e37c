// LocalRoute: world size 1 (the plan's kLocal route; a part of the GPU side, gpu_path.h): nothing
// to exchange, at most one copy or scaling, run on the caller's stream after every earlier call
// of the group; its Work completes with it.
//
// Shared state it takes (gpu_shared.h): issueMutex and the stream order, the event pool (its
// Work's event), the error word (carried by its Work).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>

#include "backend/gpu/gpu_route_counter.h"
#include "backend/gpu/gpu_shared.h"

namespace xccl::backend {

class LocalRoute {
 public:
  LocalRoute(GpuShared& shared, RouteCounter& counts) : shared_(shared), counts_(counts) {}
  LocalRoute(const LocalRoute&) = delete;
  LocalRoute& operator=(const LocalRoute&) = delete;

  // `body` (nothing, or one copy / scaling into `output`) on the caller's stream; counted.
  c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, const char* op, at::Tensor output,
                                     const std::function<void()>& body);

 private:
  GpuShared& shared_;
  RouteCounter& counts_;
};

}  // namespace xccl::backend
