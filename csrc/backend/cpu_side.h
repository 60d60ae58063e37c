// The CPU side of ProcessGroupXccl (side.h): its operations on CPU tensors, over the group's
// transports (a shared-memory segment when every rank is on one host, segments per host plus TCP
// between hosts for all_reduce of groups spanning hosts, else TCP; algo::Runner picks per call).
//
// A collective checks its arguments on the caller's thread (ValueError, nothing sent) and hands
// a body to the group's enqueue(), which gives it the next sequence number and runs it on the
// group's Executor over raw CPU buffers. Point-to-point is posted to the transport at once
// (cpu_side_p2p.cc). The GPU side's host route calls these same operations with host copies of
// CUDA tensors. Files: cpu_side_reduce.cc (the reducing collectives), cpu_side_exchange.cc (the
// data-movement ones and barrier), cpu_side_p2p.cc.
#pragma once

#include "backend/side.h"

namespace xccl::backend {

class ProcessGroupXccl;

class CpuSide final : public Side {
 public:
  // The group owns its CPU side and outlives it; rank and size never change.
  explicit CpuSide(ProcessGroupXccl& group);

  WorkPtr broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  WorkPtr allreduce_coalesced(std::vector<at::Tensor>& tensors,
                              const c10d::AllreduceCoalescedOptions& opts) override;
  WorkPtr reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  WorkPtr allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                    const c10d::AllgatherOptions& opts) override;
  WorkPtr allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllgatherOptions& opts) override;
  WorkPtr allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                              std::vector<at::Tensor>& inputs,
                              const c10d::AllgatherOptions& opts) override;
  WorkPtr gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                 const c10d::GatherOptions& opts) override;
#if XCCL_TORCH_HAS_GATHER_INTO_TENSOR
  WorkPtr gather_into_tensor(at::Tensor& output, at::Tensor& input,
                             const c10d::GatherOptions& opts) override;
#endif
  WorkPtr scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                  const c10d::ScatterOptions& opts) override;
  WorkPtr reduce_scatter(std::vector<at::Tensor>& outputs,
                         std::vector<std::vector<at::Tensor>>& inputs,
                         const c10d::ReduceScatterOptions& opts) override;
  WorkPtr reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::ReduceScatterOptions& opts) override;
  WorkPtr alltoall_base(at::Tensor& output, at::Tensor& input,
                        std::vector<int64_t>& outputSplitSizes,
                        std::vector<int64_t>& inputSplitSizes,
                        const c10d::AllToAllOptions& opts) override;
  WorkPtr alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                   const c10d::AllToAllOptions& opts) override;
  WorkPtr send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  WorkPtr recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  WorkPtr recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  // No tensors, so no side to choose: every barrier runs here, whatever devices the group uses.
  WorkPtr barrier(const c10d::BarrierOptions& opts);

 private:
  WorkPtr pointToPoint(std::vector<at::Tensor>& tensors, int peer, int tag, bool isSend,
                       const char* opName);

  ProcessGroupXccl& group_;
  const int rank_;
  const int size_;
};

}  // namespace xccl::backend
