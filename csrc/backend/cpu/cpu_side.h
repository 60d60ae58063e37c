// The CPU side of ProcessGroupXccl (side.h): its operations on CPU tensors, over the group's
// transports (a shared-memory segment when every rank is on one host, segments per host plus TCP
// between hosts for all_reduce of groups spanning hosts, else TCP; algo::Runner picks per call).
//
// A collective checks its arguments on the caller's thread (ValueError, nothing sent) and hands
// a body to GroupCore::enqueue() (group_core.h), which gives it the next sequence number and runs
// it on the group's Executor over raw CPU buffers. Point-to-point is posted to the transport at
// once (cpu_side_p2p.cc). The GPU side's host route calls these same operations with host copies of
// CUDA tensors. Files: cpu_side_reduce.cc (the reducing collectives), cpu_side_exchange.cc (the
// data-movement ones and barrier), cpu_side_p2p.cc, cpu_side_monitor.cc, cpu_side_sparse.cc.
#pragma once

#include <atomic>

#include "backend/core/side.h"

namespace xccl::backend {

class GroupCore;

class CpuSide final : public Side {
 public:
  // The group's core outlives its CPU side; one per membership (reconfigure() builds a new
  // one), so rank and size never change.
  explicit CpuSide(GroupCore& group);

  // Side's operations (side.h); defined in the files named at the top.
  XCCL_SIDE_OPERATIONS(XCCL_SIDE_OVERRIDE)

  // No tensors, so no side to choose: every barrier runs here, whatever devices the group uses.
  WorkPtr barrier(const c10d::BarrierOptions& opts);

  // CPU only, so not Side operations: torch's monitored_barrier (cpu_side_monitor.cc; blocks
  // the caller) and all_reduce of a sparse COO tensor (cpu_side_sparse.cc; SUM only, the result
  // written back into the tensor).
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks);
  WorkPtr allreduceSparse(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts);
  // xccl.hooks' compressed all_reduce (cpu_side_compressed.cc): averages a float32/float64
  // tensor in place, its bytes on the wire as `wire` (bfloat16 or float16) everywhere or, with
  // `betweenHostsOnly`, only between hosts (algo/compressed_allreduce.h).
  WorkPtr compressedAllreduce(const at::Tensor& tensor, at::ScalarType wire, bool betweenHostsOnly);

 private:
  WorkPtr pointToPoint(std::vector<at::Tensor>& tensors, int peer, int tag, bool isSend,
                       const char* opName);

  GroupCore& group_;
  const int rank_;
  const int size_;
  std::atomic<uint64_t> monitoredBarriers_{0};  // calls of monitoredBarrier so far
};

}  // namespace xccl::backend
