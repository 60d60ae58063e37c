// GpuPath: the operations of Side without a kernel, and the one door every call that takes the
// vendor or host route goes through (gpu_path.h says which file holds what). Each operation names
// every tensor the call reads or writes (the host route copies them to host memory) and the ones
// it writes (copied back).
#include <c10/util/Exception.h>

#include "backend/gpu/gpu_path.h"

namespace xccl::backend {

Side::WorkPtr GpuPath::withoutKernel(const char* op, const LibraryCall& call,
                                     const std::vector<at::Tensor*>& args,
                                     const std::vector<at::Tensor*>& outputs, bool vendorCan) {
  for (at::Tensor* t : args) checkTensor(*t, op, "tensor", home());
  shared_.checkHealthy(op);
  const algo::GpuPlan plan = choice_.planFor(algo::GpuCollective::kOther, 0, DataType::kUInt8,
                                             ReduceOp::kSum, true, vendorCan);
  return other(op, plan.route, plan.reason.c_str(), call, args, outputs);
}

// Spans parts: the batch (VendorRoute), the route the plan named, and the counters.
Side::WorkPtr GpuPath::other(const char* op, algo::GpuRoute route, const char* reason,
                             const LibraryCall& call, const std::vector<at::Tensor*>& args,
                             const std::vector<at::Tensor*>& outputs) {
  if (vendor_.batchOpen() && route != algo::GpuRoute::kVendor) {
    (void)endCoalescing();  // what the batch held so far still runs
    TORCH_CHECK_VALUE(false, "xccl ", op,
                      " cannot be part of a coalesced batch with CUDA "
                      "tensors (",
                      reason, "); the batch was closed");
  }
  c10::intrusive_ptr<c10d::Work> work;
  if (route == algo::GpuRoute::kVendor) {
    c10d::Backend* vendor = vendor_.group(op);
    TORCH_INTERNAL_ASSERT(vendor != nullptr, "planned the vendor route without a vendor group");
    work = vendor_.run(op, *vendor, call);
  } else {
    work = host_.run(op, call, args, outputs);
  }
  counts_.count(route == algo::GpuRoute::kVendor ? route : algo::GpuRoute::kHost);
  return work;
}

Side::WorkPtr GpuPath::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceCoalescedOptions& opts) {
  const char* name = "allreduce_coalesced";
  return withoutKernel(
      name, [&](auto& b) { return b.allreduce_coalesced(tensors, opts); }, pointers(tensors),
      pointers(tensors), vendorReduces(reduceOpOf(opts.reduceOp, name)));
}

Side::WorkPtr GpuPath::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  return withoutKernel(
      "reduce", [&](auto& b) { return b.reduce(tensors, opts); }, pointers(tensors),
      pointers(tensors), vendorReduces(reduceOpOf(opts.reduceOp, "reduce")));
}

Side::WorkPtr GpuPath::reduce_scatter(std::vector<at::Tensor>& outputs,
                                      std::vector<std::vector<at::Tensor>>& inputs,
                                      const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter";
  return withoutKernel(
      name, [&](auto& b) { return b.reduce_scatter(outputs, inputs, opts); },
      pointers(outputs, inputs), pointers(outputs), vendorReduces(reduceOpOf(opts.reduceOp, name)));
}

Side::WorkPtr GpuPath::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                 std::vector<at::Tensor>& inputs,
                                 const c10d::AllgatherOptions& opts) {
  return withoutKernel(
      "allgather", [&](auto& b) { return b.allgather(outputs, inputs, opts); },
      pointers(outputs, inputs), pointers(outputs));
}

Side::WorkPtr GpuPath::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) {
  return withoutKernel(
      "allgather_coalesced", [&](auto& b) { return b.allgather_coalesced(outputs, inputs, opts); },
      pointers(outputs, inputs), pointers(outputs));
}

Side::WorkPtr GpuPath::gather(std::vector<std::vector<at::Tensor>>& outputs,
                              std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  return withoutKernel(
      "gather", [&](auto& b) { return b.gather(outputs, inputs, opts); }, pointers(outputs, inputs),
      pointers(outputs));
}

#if XCCL_TORCH_HAS_GATHER_INTO_TENSOR
Side::WorkPtr GpuPath::gather_into_tensor(at::Tensor& output, at::Tensor& input,
                                          const c10d::GatherOptions& opts) {
  return withoutKernel(
      "gather_into_tensor", [&](auto& b) { return b.gather_into_tensor(output, input, opts); },
      pointers(output, input), pointers(output));
}
#endif

Side::WorkPtr GpuPath::scatter(std::vector<at::Tensor>& outputs,
                               std::vector<std::vector<at::Tensor>>& inputs,
                               const c10d::ScatterOptions& opts) {
  return withoutKernel(
      "scatter", [&](auto& b) { return b.scatter(outputs, inputs, opts); },
      pointers(outputs, inputs), pointers(outputs));
}

Side::WorkPtr GpuPath::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                const c10d::AllToAllOptions& opts) {
  return withoutKernel(
      "alltoall", [&](auto& b) { return b.alltoall(outputs, inputs, opts); },
      pointers(outputs, inputs), pointers(outputs));
}

// A send only reads its tensor: nothing to copy back on the host route.
Side::WorkPtr GpuPath::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  return withoutKernel("send", [&](auto& b) { return b.send(tensors, dstRank, tag); },
                       pointers(tensors), {});
}

Side::WorkPtr GpuPath::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  return withoutKernel(
      "recv", [&](auto& b) { return b.recv(tensors, srcRank, tag); }, pointers(tensors),
      pointers(tensors));
}

Side::WorkPtr GpuPath::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return withoutKernel(
      "recv", [&](auto& b) { return b.recvAnysource(tensors, tag); }, pointers(tensors),
      pointers(tensors));
}

}  // namespace xccl::backend
