// One side of ProcessGroupXccl: what the group does with the tensors of one kind of device.
//
// ProcessGroupXccl's c10d entry points pick the side once per call, from the tensors' device,
// and forward the call unchanged:
//  - CPU tensors: CpuSide (cpu_side.h), the collectives of csrc/algo over shared memory and TCP;
//  - CUDA tensors: the GPU side (gpu_side.h), which routes each call to xccl's kernels, the
//    vendor library, or host memory, where it calls the CPU side with host copies.
// The operations are the c10d::Backend ones xccl serves, with c10d's names and signatures, so
// one generic lambda spells a call for either side and for a vendor c10d::Backend alike (the GPU
// side's vendor and host routes rely on that). Each side checks its arguments on the caller's
// thread (tensor_args.h; ValueError, nothing sent) before anything moves.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <cstdint>
#include <vector>

#include "backend/compat.h"

namespace xccl::backend {

class Side {
 public:
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;
  virtual ~Side() = default;

  virtual WorkPtr broadcast(std::vector<at::Tensor>& tensors,
                            const c10d::BroadcastOptions& opts) = 0;
  virtual WorkPtr allreduce(std::vector<at::Tensor>& tensors,
                            const c10d::AllreduceOptions& opts) = 0;
  virtual WorkPtr allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                      const c10d::AllreduceCoalescedOptions& opts) = 0;
  virtual WorkPtr reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) = 0;
  virtual WorkPtr allgather(std::vector<std::vector<at::Tensor>>& outputs,
                            std::vector<at::Tensor>& inputs,
                            const c10d::AllgatherOptions& opts) = 0;
  // all_gather_into_tensor (one pair) and its coalesced form.
  virtual WorkPtr allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                  std::vector<at::Tensor>& inputs,
                                                  const c10d::AllgatherOptions& opts) = 0;
  virtual WorkPtr allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                      std::vector<at::Tensor>& inputs,
                                      const c10d::AllgatherOptions& opts) = 0;
  virtual WorkPtr gather(std::vector<std::vector<at::Tensor>>& outputs,
                         std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) = 0;
#if XCCL_TORCH_HAS_GATHER_INTO_TENSOR
  virtual WorkPtr gather_into_tensor(at::Tensor& output, at::Tensor& input,
                                     const c10d::GatherOptions& opts) = 0;
#endif
  virtual WorkPtr scatter(std::vector<at::Tensor>& outputs,
                          std::vector<std::vector<at::Tensor>>& inputs,
                          const c10d::ScatterOptions& opts) = 0;
  virtual WorkPtr reduce_scatter(std::vector<at::Tensor>& outputs,
                                 std::vector<std::vector<at::Tensor>>& inputs,
                                 const c10d::ReduceScatterOptions& opts) = 0;
  // reduce_scatter_tensor (one pair) and its coalesced form.
  virtual WorkPtr reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                  std::vector<at::Tensor>& inputs,
                                                  const c10d::ReduceScatterOptions& opts) = 0;
  virtual WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input,
                                std::vector<int64_t>& outputSplitSizes,
                                std::vector<int64_t>& inputSplitSizes,
                                const c10d::AllToAllOptions& opts) = 0;
  virtual WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                           const c10d::AllToAllOptions& opts) = 0;

  // Point-to-point.
  virtual WorkPtr send(std::vector<at::Tensor>& tensors, int dstRank, int tag) = 0;
  virtual WorkPtr recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) = 0;
  virtual WorkPtr recvAnysource(std::vector<at::Tensor>& tensors, int tag) = 0;
};

}  // namespace xccl::backend
