// ProcessGroupXccl's c10d entry points for collectives and point-to-point: each picks the side
// once, from its tensors' device (Sides::on()), and forwards the call unchanged (side.h). The
// name given to on() is the one a refused call reports.
#include "backend/core/tensor_args.h"
#include "backend/cpu/cpu_side.h"
#include "backend/process_group.h"

namespace xccl::backend {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

namespace {

// The one-pair forms (_allgather_base, _reduce_scatter_base) are their coalesced forms with one
// pair, so both take one path through the sides and one set of checks.
template <typename Options>
WorkPtr asOnePair(ProcessGroupXccl& group, at::Tensor& output, at::Tensor& input,
                  const Options& opts,
                  WorkPtr (ProcessGroupXccl::*coalesced)(std::vector<at::Tensor>&,
                                                         std::vector<at::Tensor>&,
                                                         const Options&)) {
  std::vector<at::Tensor> outputs{output}, inputs{input};
  return (group.*coalesced)(outputs, inputs, opts);
}

}  // namespace

WorkPtr ProcessGroupXccl::broadcast(std::vector<at::Tensor>& tensors,
                                    const c10d::BroadcastOptions& opts) {
  return sides_.on(pointers(tensors), "broadcast",
                   [&](Side& s) { return s.broadcast(tensors, opts); });
}

WorkPtr ProcessGroupXccl::allreduce(std::vector<at::Tensor>& tensors,
                                    const c10d::AllreduceOptions& opts) {
  // torch hands sparse CPU tensors of dist.all_reduce (and DDP's sparse gradients) to allreduce.
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].is_sparse()) {
    return allreduce_sparse(tensors, opts);
  }
  return sides_.on(pointers(tensors), "allreduce",
                   [&](Side& s) { return s.allreduce(tensors, opts); });
}

WorkPtr ProcessGroupXccl::allreduce_sparse(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) {
  return sides_.cpu().allreduceSparse(tensors, opts);
}

WorkPtr ProcessGroupXccl::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                              const c10d::AllreduceCoalescedOptions& opts) {
  return sides_.on(pointers(tensors), "allreduce_coalesced",
                   [&](Side& s) { return s.allreduce_coalesced(tensors, opts); });
}

WorkPtr ProcessGroupXccl::reduce(std::vector<at::Tensor>& tensors,
                                 const c10d::ReduceOptions& opts) {
  return sides_.on(pointers(tensors), "reduce", [&](Side& s) { return s.reduce(tensors, opts); });
}

WorkPtr ProcessGroupXccl::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                    std::vector<at::Tensor>& inputs,
                                    const c10d::AllgatherOptions& opts) {
  return sides_.on(pointers(outputs, inputs), "allgather",
                   [&](Side& s) { return s.allgather(outputs, inputs, opts); });
}

WorkPtr ProcessGroupXccl::_allgather_base(at::Tensor& output, at::Tensor& input,
                                          const c10d::AllgatherOptions& opts) {
  return asOnePair(*this, output, input, opts, &ProcessGroupXccl::allgather_into_tensor_coalesced);
}

WorkPtr ProcessGroupXccl::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllgatherOptions& opts) {
  return sides_.on(pointers(outputs, inputs), "allgather_into_tensor", [&](Side& s) {
    return s.allgather_into_tensor_coalesced(outputs, inputs, opts);
  });
}

WorkPtr ProcessGroupXccl::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                              std::vector<at::Tensor>& inputs,
                                              const c10d::AllgatherOptions& opts) {
  return sides_.on(pointers(outputs, inputs), "allgather_coalesced",
                   [&](Side& s) { return s.allgather_coalesced(outputs, inputs, opts); });
}

WorkPtr ProcessGroupXccl::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                 std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  return sides_.on(pointers(outputs, inputs), "gather",
                   [&](Side& s) { return s.gather(outputs, inputs, opts); });
}

#if XCCL_TORCH_HAS_GATHER_INTO_TENSOR
WorkPtr ProcessGroupXccl::gather_into_tensor(at::Tensor& output, at::Tensor& input,
                                             const c10d::GatherOptions& opts) {
  return sides_.on(pointers(output, input), "gather_into_tensor",
                   [&](Side& s) { return s.gather_into_tensor(output, input, opts); });
}
#endif

WorkPtr ProcessGroupXccl::scatter(std::vector<at::Tensor>& outputs,
                                  std::vector<std::vector<at::Tensor>>& inputs,
                                  const c10d::ScatterOptions& opts) {
  return sides_.on(pointers(outputs, inputs), "scatter",
                   [&](Side& s) { return s.scatter(outputs, inputs, opts); });
}

WorkPtr ProcessGroupXccl::reduce_scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ReduceScatterOptions& opts) {
  return sides_.on(pointers(outputs, inputs), "reduce_scatter",
                   [&](Side& s) { return s.reduce_scatter(outputs, inputs, opts); });
}

WorkPtr ProcessGroupXccl::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                               const c10d::ReduceScatterOptions& opts) {
  return asOnePair(*this, output, input, opts, &ProcessGroupXccl::reduce_scatter_tensor_coalesced);
}

WorkPtr ProcessGroupXccl::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::ReduceScatterOptions& opts) {
  return sides_.on(pointers(outputs, inputs), "reduce_scatter_tensor", [&](Side& s) {
    return s.reduce_scatter_tensor_coalesced(outputs, inputs, opts);
  });
}

WorkPtr ProcessGroupXccl::alltoall_base(at::Tensor& output, at::Tensor& input,
                                        std::vector<int64_t>& outputSplitSizes,
                                        std::vector<int64_t>& inputSplitSizes,
                                        const c10d::AllToAllOptions& opts) {
  return sides_.on(pointers(output, input), "alltoall", [&](Side& s) {
    return s.alltoall_base(output, input, outputSplitSizes, inputSplitSizes, opts);
  });
}

WorkPtr ProcessGroupXccl::alltoall(std::vector<at::Tensor>& outputs,
                                   std::vector<at::Tensor>& inputs,
                                   const c10d::AllToAllOptions& opts) {
  return sides_.on(pointers(outputs, inputs), "alltoall",
                   [&](Side& s) { return s.alltoall(outputs, inputs, opts); });
}

WorkPtr ProcessGroupXccl::barrier(const c10d::BarrierOptions& opts) {
  return sides_.cpu().barrier(opts);
}

void ProcessGroupXccl::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  sides_.cpu().monitoredBarrier(opts, waitAllRanks);
}

WorkPtr ProcessGroupXccl::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  return sides_.on(pointers(tensors), "send",
                   [&](Side& s) { return s.send(tensors, dstRank, tag); });
}

WorkPtr ProcessGroupXccl::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  return sides_.on(pointers(tensors), "recv",
                   [&](Side& s) { return s.recv(tensors, srcRank, tag); });
}

WorkPtr ProcessGroupXccl::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return sides_.on(pointers(tensors), "recv",
                   [&](Side& s) { return s.recvAnysource(tensors, tag); });
}

}  // namespace xccl::backend
