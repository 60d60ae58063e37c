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

#include "backend/core/compat.h"

namespace xccl::backend {

// The operations of a side, listed once: X(name, (parameters)) for each. Side expands the list to
// pure virtuals (XCCL_SIDE_PURE) and each side to its overrides (XCCL_SIDE_OVERRIDE), so the
// sides cannot drift apart and a new operation is one line here plus its definitions. The
// parameter lists are c10d::Backend's, verbatim (why: the top of this file).
#define XCCL_SIDE_OPERATIONS(X)                                                                   \
  X(broadcast, (std::vector<at::Tensor> & tensors, const c10d::BroadcastOptions& opts))           \
  X(allreduce, (std::vector<at::Tensor> & tensors, const c10d::AllreduceOptions& opts))           \
  X(allreduce_coalesced,                                                                          \
    (std::vector<at::Tensor> & tensors, const c10d::AllreduceCoalescedOptions& opts))             \
  X(reduce, (std::vector<at::Tensor> & tensors, const c10d::ReduceOptions& opts))                 \
  X(allgather, (std::vector<std::vector<at::Tensor>> & outputs, std::vector<at::Tensor> & inputs, \
                const c10d::AllgatherOptions& opts))                                              \
  /* all_gather_into_tensor (one pair) and its coalesced form */                                  \
  X(allgather_into_tensor_coalesced,                                                              \
    (std::vector<at::Tensor> & outputs, std::vector<at::Tensor> & inputs,                         \
     const c10d::AllgatherOptions& opts))                                                         \
  X(allgather_coalesced, (std::vector<std::vector<at::Tensor>> & outputs,                         \
                          std::vector<at::Tensor> & inputs, const c10d::AllgatherOptions& opts))  \
  X(gather, (std::vector<std::vector<at::Tensor>> & outputs, std::vector<at::Tensor> & inputs,    \
             const c10d::GatherOptions& opts))                                                    \
  XCCL_SIDE_GATHER_INTO_TENSOR(X)                                                                 \
  X(scatter, (std::vector<at::Tensor> & outputs, std::vector<std::vector<at::Tensor>> & inputs,   \
              const c10d::ScatterOptions& opts))                                                  \
  X(reduce_scatter,                                                                               \
    (std::vector<at::Tensor> & outputs, std::vector<std::vector<at::Tensor>> & inputs,            \
     const c10d::ReduceScatterOptions& opts))                                                     \
  /* reduce_scatter_tensor (one pair) and its coalesced form */                                   \
  X(reduce_scatter_tensor_coalesced,                                                              \
    (std::vector<at::Tensor> & outputs, std::vector<at::Tensor> & inputs,                         \
     const c10d::ReduceScatterOptions& opts))                                                     \
  X(alltoall_base,                                                                                \
    (at::Tensor & output, at::Tensor & input, std::vector<int64_t> & outputSplitSizes,            \
     std::vector<int64_t> & inputSplitSizes, const c10d::AllToAllOptions& opts))                  \
  X(alltoall, (std::vector<at::Tensor> & outputs, std::vector<at::Tensor> & inputs,               \
               const c10d::AllToAllOptions& opts))                                                \
  /* point-to-point */                                                                            \
  X(send, (std::vector<at::Tensor> & tensors, int dstRank, int tag))                              \
  X(recv, (std::vector<at::Tensor> & tensors, int srcRank, int tag))                              \
  X(recvAnysource, (std::vector<at::Tensor> & tensors, int tag))

// gather_into_tensor exists only where torch's c10d::Backend has it (compat.h).
#if XCCL_TORCH_HAS_GATHER_INTO_TENSOR
#define XCCL_SIDE_GATHER_INTO_TENSOR(X) \
  X(gather_into_tensor, (at::Tensor & output, at::Tensor & input, const c10d::GatherOptions& opts))
#else
#define XCCL_SIDE_GATHER_INTO_TENSOR(X)
#endif

#define XCCL_SIDE_PURE(name, parameters) virtual WorkPtr name parameters = 0;
#define XCCL_SIDE_OVERRIDE(name, parameters) WorkPtr name parameters override;

class Side {
 public:
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;
  virtual ~Side() = default;

  XCCL_SIDE_OPERATIONS(XCCL_SIDE_PURE)
};

}  // namespace xccl::backend
