// The CPU side's reducing collectives (cpu_side.h): allreduce (plain and coalesced), reduce,
// reduce_scatter (list, flat and coalesced). Each checks its arguments here, on the caller's
// thread, and hands a body to the group's enqueue(); bodies run the collectives of
// algo/runner.h (shared memory or TCP) on raw CPU buffers.
#include <c10/util/Exception.h>

#include "algo/runner.h"
#include "backend/core/group_core.h"
#include "backend/core/tensor_args.h"
#include "backend/cpu/cpu_side.h"

namespace xccl::backend {
namespace {

ReduceOp algorithmOp(const ReduceSpec& spec) {
  return spec.op == ReduceOp::kPreMulSum ? ReduceOp::kSum : spec.op;
}

}  // namespace

Side::WorkPtr CpuSide::allreduce(std::vector<at::Tensor>& tensors,
                                 const c10d::AllreduceOptions& opts) {
  at::Tensor tensor = single(tensors, "allreduce");
  TORCH_CHECK_VALUE(!opts.sparseIndices.has_value(),
                    "xccl allreduce: sparse tensors are not supported");
  ReduceSpec spec = toReduceSpec(opts.reduceOp, "allreduce");
  ElementView view = reduceView(tensor, spec, "allreduce");
  return group_.enqueue(c10d::OpType::ALLREDUCE, "allreduce", {tensor},
                        group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
                        [tensor, spec, view](const algo::Runner& ctx) mutable {
                          applyFactor(tensor, spec);
                          algo::allReduce(ctx, tensor.data_ptr(), view.count, view.type,
                                          algorithmOp(spec));
                        });
}

Side::WorkPtr CpuSide::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "xccl allreduce_coalesced: no tensors");
  ReduceSpec spec = toReduceSpec(opts.reduceOp, "allreduce_coalesced");
  for (const auto& t : tensors) {
    checkTensor(t, "allreduce_coalesced", "tensor");
    reduceView(t, spec, "allreduce_coalesced");
  }
  checkSameDtypes(tensors, "allreduce_coalesced");
  // One collective over the concatenation: one round of latency instead of one per tensor.
  return group_.enqueue(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors,
                        group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
                        [tensors, spec](const algo::Runner& ctx) {
                          std::vector<at::Tensor> flat;
                          for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
                          at::Tensor buffer = at::cat(flat);
                          applyFactor(buffer, spec);
                          ElementView view = reduceView(buffer, spec, "allreduce_coalesced");
                          algo::allReduce(ctx, buffer.data_ptr(), view.count, view.type,
                                          algorithmOp(spec));
                          int64_t offset = 0;
                          for (const auto& t : tensors) {
                            t.view({-1}).copy_(buffer.narrow(0, offset, t.numel()));
                            offset += t.numel();
                          }
                        });
}

Side::WorkPtr CpuSide::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  at::Tensor tensor = single(tensors, "reduce");
  checkRoot(opts.rootRank, size_, "reduce");
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "xccl reduce: rootTensor must be 0");
  ReduceSpec spec = toReduceSpec(opts.reduceOp, "reduce");
  ElementView view = reduceView(tensor, spec, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  return group_.enqueue(c10d::OpType::REDUCE, "reduce", {tensor},
                        group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
                        [tensor, spec, view, root, isRoot](const algo::Runner& ctx) {
                          // Non-roots keep their input: the algorithm may use its buffer as
                          // scratch.
                          at::Tensor buffer = isRoot ? tensor : tensor.clone();
                          applyFactor(buffer, spec);
                          algo::reduce(ctx, buffer.data_ptr(), view.count, view.type,
                                       algorithmOp(spec), root);
                        });
}

Side::WorkPtr CpuSide::reduce_scatter(std::vector<at::Tensor>& outputs,
                                      std::vector<std::vector<at::Tensor>>& inputs,
                                      const c10d::ReduceScatterOptions& opts) {
  at::Tensor output = single(outputs, "reduce_scatter");
  TORCH_CHECK_VALUE(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                    "xccl reduce_scatter: expected one list of ", size_, " input tensors");
  for (const auto& t : inputs[0]) {
    checkTensor(t, "reduce_scatter", "input");
    checkSameShapeAndType(t, output, "reduce_scatter");
  }
  ReduceSpec spec = toReduceSpec(opts.reduceOp, "reduce_scatter");
  ElementView view = reduceView(output, spec, "reduce_scatter");
  std::vector<at::Tensor> list = inputs[0];
  return group_.enqueue(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", {output}, list,
                        group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
                        [output, list, spec, view](const algo::Runner& ctx) {
                          std::vector<at::Tensor> flat;
                          for (const auto& t : list) flat.push_back(t.reshape({-1}));
                          at::Tensor buffer = at::cat(flat);
                          applyFactor(buffer, spec);
                          algo::reduceScatter(ctx, buffer.data_ptr(), output.data_ptr(), view.count,
                                              view.type, algorithmOp(spec));
                        });
}

Side::WorkPtr CpuSide::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor";
  TORCH_CHECK_VALUE(outputs.size() == inputs.size() && !inputs.empty(), "xccl ", name,
                    ": expected as many outputs as inputs");
  ReduceSpec spec = toReduceSpec(opts.reduceOp, name);
  std::vector<ElementView> views;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], name, "input");
    checkTensor(outputs[i], name, "output");
    checkFlatPair(inputs[i], "input", outputs[i], "output", size_, name);
    views.push_back(reduceView(outputs[i], spec, name));
  }
  return group_.enqueue(
      c10d::OpType::_REDUCE_SCATTER_BASE, name, outputs, inputs,
      group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
      [outputs, inputs, spec, views](const algo::Runner& ctx) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          // PREMUL_SUM scales a copy: the input is not ours to modify.
          at::Tensor in = spec.factor ? inputs[i].mul(*spec.factor) : inputs[i];
          algo::reduceScatter(algo::subCollective(ctx, i), in.data_ptr(), outputs[i].data_ptr(),
                              views[i].count, views[i].type, algorithmOp(spec));
        }
      },
      inputs.size());
}

}  // namespace xccl::backend
