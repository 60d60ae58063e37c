// The CPU side's data-movement collectives (cpu_side.h): broadcast, allgather (list, flat,
// coalesced), gather, scatter, all-to-all (flat with splits, and list), barrier. They move
// bytes, so every dtype works.
#include <c10/util/Exception.h>

#include <numeric>

#include "algo/runner.h"
#include "backend/core/group_core.h"
#include "backend/core/tensor_args.h"
#include "backend/cpu/cpu_side.h"

namespace xccl::backend {
namespace {

// Concatenates `tensors` (flattened) into one new contiguous tensor.
at::Tensor pack(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive slices of `buffer` back into `tensors`.
void unpack(const at::Tensor& buffer, const std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (const auto& t : tensors) {
    t.view({-1}).copy_(buffer.narrow(0, offset, t.numel()));
    offset += t.numel();
  }
}

std::vector<size_t> byteSizes(const std::vector<at::Tensor>& tensors) {
  std::vector<size_t> sizes;
  for (const auto& t : tensors) sizes.push_back(byteSize(t));
  return sizes;
}

std::vector<size_t> offsetsOf(const std::vector<size_t>& lengths) {
  std::vector<size_t> offsets(lengths.size(), 0);
  for (size_t i = 1; i < lengths.size(); ++i) offsets[i] = offsets[i - 1] + lengths[i - 1];
  return offsets;
}

}  // namespace

CpuSide::CpuSide(GroupCore& group)
    : group_(group), rank_(group.membership().rank()), size_(group.membership().size()) {}

Side::WorkPtr CpuSide::broadcast(std::vector<at::Tensor>& tensors,
                                 const c10d::BroadcastOptions& opts) {
  at::Tensor tensor = single(tensors, "broadcast");
  checkRoot(opts.rootRank, size_, "broadcast");
  TORCH_CHECK_VALUE(opts.rootTensor == 0, "xccl broadcast: rootTensor must be 0");
  const int root = static_cast<int>(opts.rootRank);
  return group_.enqueue(c10d::OpType::BROADCAST, "broadcast", {tensor},
                        group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
                        [tensor, root](const algo::Runner& ctx) {
                          algo::broadcast(ctx, tensor.data_ptr(), byteSize(tensor), root);
                        });
}

Side::WorkPtr CpuSide::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                 std::vector<at::Tensor>& inputs,
                                 const c10d::AllgatherOptions& opts) {
  at::Tensor input = single(inputs, "allgather");
  TORCH_CHECK_VALUE(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                    "xccl allgather: expected one list of ", size_, " output tensors");
  std::vector<at::Tensor> list = outputs[0];
  for (const auto& t : list) {
    checkTensor(t, "allgather", "output");
    TORCH_CHECK_VALUE(t.scalar_type() == input.scalar_type(), "xccl allgather: dtype mismatch");
  }
  TORCH_CHECK_VALUE(list[rank_].numel() == input.numel(), "xccl allgather: this rank's output has ",
                    list[rank_].numel(), " elements but its input has ", input.numel());
  return group_.enqueue(c10d::OpType::ALLGATHER, "allgather", list, std::vector<at::Tensor>{input},
                        group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
                        [input, list](const algo::Runner& ctx) {
                          std::vector<size_t> sizes = byteSizes(list);
                          size_t total = std::accumulate(sizes.begin(), sizes.end(), size_t{0});
                          at::Tensor buffer = at::empty({static_cast<int64_t>(total)}, at::kByte);
                          algo::allGather(ctx, input.data_ptr(), buffer.data_ptr(), sizes);
                          size_t offset = 0;
                          for (size_t r = 0; r < list.size(); ++r) {
                            std::memcpy(list[r].data_ptr(), buffer.data_ptr<uint8_t>() + offset,
                                        sizes[r]);
                            offset += sizes[r];
                          }
                        });
}

Side::WorkPtr CpuSide::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllgatherOptions& opts) {
  const char* name = "allgather_into_tensor";
  TORCH_CHECK_VALUE(outputs.size() == inputs.size() && !inputs.empty(), "xccl ", name,
                    ": expected as many outputs as inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], name, "input");
    checkTensor(outputs[i], name, "output");
    checkFlatPair(outputs[i], "output", inputs[i], "input", size_, name);
  }
  return group_.enqueue(
      c10d::OpType::_ALLGATHER_BASE, name, outputs, inputs,
      group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
      [outputs, inputs, size = size_](const algo::Runner& ctx) {
        for (size_t i = 0; i < inputs.size(); ++i) {
          std::vector<size_t> sizes(size, byteSize(inputs[i]));
          algo::allGather(algo::subCollective(ctx, i), inputs[i].data_ptr(), outputs[i].data_ptr(),
                          sizes);
        }
      },
      inputs.size());
}

Side::WorkPtr CpuSide::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) {
  TORCH_CHECK_VALUE(outputs.size() == static_cast<size_t>(size_),
                    "xccl allgather_coalesced: "
                    "expected ",
                    size_, " output lists");
  std::vector<at::Tensor> all;
  for (auto& list : outputs) {
    TORCH_CHECK_VALUE(list.size() == inputs.size(), "xccl allgather_coalesced: each output list "
                                                    "needs one tensor per input");
    for (size_t i = 0; i < list.size(); ++i) {
      checkTensor(list[i], "allgather_coalesced", "output");
      checkSameShapeAndType(list[i], inputs[i], "allgather_coalesced");
      all.push_back(list[i]);
    }
  }
  for (const auto& t : inputs) checkTensor(t, "allgather_coalesced", "input");
  // Every rank contributes the packed concatenation of its inputs.
  return group_.enqueue(c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced", all, inputs,
                        group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
                        [outputs, inputs](const algo::Runner& ctx) {
                          at::Tensor mine = pack(inputs);
                          size_t bytes = byteSize(mine);
                          at::Tensor gathered =
                              at::empty({static_cast<int64_t>(bytes * outputs.size())}, at::kByte);
                          algo::allGather(ctx, mine.data_ptr(), gathered.data_ptr(),
                                          std::vector<size_t>(outputs.size(), bytes));
                          for (size_t r = 0; r < outputs.size(); ++r) {
                            at::Tensor part =
                                gathered.narrow(0, r * bytes, bytes).view(mine.scalar_type());
                            unpack(part, outputs[r]);
                          }
                        });
}

Side::WorkPtr CpuSide::gather(std::vector<std::vector<at::Tensor>>& outputs,
                              std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  at::Tensor input = single(inputs, "gather");
  checkRoot(opts.rootRank, size_, "gather");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> list;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                      "xccl gather: the root needs one list of ", size_, " output tensors");
    list = outputs[0];
    for (const auto& t : list) {
      checkTensor(t, "gather", "output");
      checkSameShapeAndType(t, input, "gather");
    }
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                      "xccl gather: only the root passes output tensors");
  }
  return group_.enqueue(c10d::OpType::GATHER, "gather", list, std::vector<at::Tensor>{input},
                        group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
                        [input, list, root](const algo::Runner& ctx) {
                          at::Tensor buffer;
                          if (!list.empty())
                            buffer = at::empty({input.numel() * ctx.size()}, input.options());
                          algo::gather(ctx, input.data_ptr(), byteSize(input),
                                       buffer.defined() ? buffer.data_ptr() : nullptr, root);
                          if (!list.empty()) unpack(buffer, list);
                        });
}

#if XCCL_TORCH_HAS_GATHER_INTO_TENSOR
Side::WorkPtr CpuSide::gather_into_tensor(at::Tensor& output, at::Tensor& input,
                                          const c10d::GatherOptions& opts) {
  checkTensor(input, "gather_into_tensor", "input");
  checkRoot(opts.rootRank, size_, "gather_into_tensor");
  const int root = static_cast<int>(opts.rootRank);
  if (rank_ == root) {
    checkTensor(output, "gather_into_tensor", "output");
    TORCH_CHECK_VALUE(output.scalar_type() == input.scalar_type() &&
                          output.numel() == input.numel() * size_,
                      "xccl gather_into_tensor: output must hold group size x input elements");
  }
  std::vector<at::Tensor> outs;
  if (rank_ == root) outs.push_back(output);
  return group_.enqueue(c10d::OpType::GATHER, "gather_into_tensor", outs,
                        std::vector<at::Tensor>{input},
                        group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
                        [input, outs, root](const algo::Runner& ctx) {
                          algo::gather(ctx, input.data_ptr(), byteSize(input),
                                       outs.empty() ? nullptr : outs[0].data_ptr(), root);
                        });
}
#endif

Side::WorkPtr CpuSide::scatter(std::vector<at::Tensor>& outputs,
                               std::vector<std::vector<at::Tensor>>& inputs,
                               const c10d::ScatterOptions& opts) {
  at::Tensor output = single(outputs, "scatter");
  checkRoot(opts.rootRank, size_, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> list;
  if (rank_ == root) {
    TORCH_CHECK_VALUE(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                      "xccl scatter: the root needs one list of ", size_, " input tensors");
    list = inputs[0];
    for (const auto& t : list) {
      checkTensor(t, "scatter", "input");
      checkSameShapeAndType(t, output, "scatter");
    }
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                      "xccl scatter: only the root passes input tensors");
  }
  return group_.enqueue(c10d::OpType::SCATTER, "scatter", {output}, list,
                        group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
                        [output, list, root](const algo::Runner& ctx) {
                          at::Tensor buffer;
                          if (!list.empty()) buffer = pack(list);
                          algo::scatter(ctx, buffer.defined() ? buffer.data_ptr() : nullptr,
                                        output.data_ptr(), byteSize(output), root);
                        });
}

Side::WorkPtr CpuSide::alltoall_base(at::Tensor& output, at::Tensor& input,
                                     std::vector<int64_t>& outputSplitSizes,
                                     std::vector<int64_t>& inputSplitSizes,
                                     const c10d::AllToAllOptions& opts) {
  checkTensor(input, "alltoall", "input");
  checkTensor(output, "alltoall", "output");
  TORCH_CHECK_VALUE(input.scalar_type() == output.scalar_type(), "xccl alltoall: dtype mismatch");
  std::vector<size_t> sendBytes = alltoallSplitBytes(input, inputSplitSizes, size_, "input");
  std::vector<size_t> recvBytes = alltoallSplitBytes(output, outputSplitSizes, size_, "output");
  return group_.enqueue(c10d::OpType::ALLTOALL_BASE, "alltoall", {output},
                        std::vector<at::Tensor>{input},
                        group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
                        [input, output, sendBytes, recvBytes](const algo::Runner& ctx) {
                          algo::allToAll(ctx, input.data_ptr(), offsetsOf(sendBytes), sendBytes,
                                         output.data_ptr(), offsetsOf(recvBytes), recvBytes);
                        });
}

Side::WorkPtr CpuSide::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                const c10d::AllToAllOptions& opts) {
  TORCH_CHECK_VALUE(inputs.size() == static_cast<size_t>(size_) && outputs.size() == inputs.size(),
                    "xccl alltoall: expected ", size_, " input and output tensors");
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkTensor(inputs[i], "alltoall", "input");
    checkTensor(outputs[i], "alltoall", "output");
    TORCH_CHECK_VALUE(inputs[i].scalar_type() == inputs[0].scalar_type() &&
                          outputs[i].scalar_type() == inputs[0].scalar_type(),
                      "xccl alltoall: all tensors must have the same dtype");
  }
  return group_.enqueue(
      c10d::OpType::ALLTOALL, "alltoall", outputs, inputs,
      group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
      [inputs, outputs](const algo::Runner& ctx) {
        at::Tensor in = pack(inputs);
        std::vector<size_t> sendBytes = byteSizes(inputs), recvBytes = byteSizes(outputs);
        size_t total = std::accumulate(recvBytes.begin(), recvBytes.end(), size_t{0});
        at::Tensor out = at::empty({static_cast<int64_t>(total / in.element_size())}, in.options());
        algo::allToAll(ctx, in.data_ptr(), offsetsOf(sendBytes), sendBytes, out.data_ptr(),
                       offsetsOf(recvBytes), recvBytes);
        unpack(out, outputs);
      });
}

Side::WorkPtr CpuSide::barrier(const c10d::BarrierOptions& opts) {
  return group_.enqueue(c10d::OpType::BARRIER, "barrier", {},
                        group_.sequencer().effectiveTimeout(opts.timeout), compat::isAsync(opts),
                        [](const algo::Runner& ctx) { algo::barrier(ctx); });
}

}  // namespace xccl::backend
