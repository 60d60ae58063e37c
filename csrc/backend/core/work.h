// The Work handed back for every CPU-side operation: completes once, with the output tensors as
// the future's value (a List[Tensor], which DDP's reducer requires) or with the torch exception
// for the failure (torch_error.h). The future is made on the first getFuture() only (DDP's comm
// hooks, get_future()): a plain dist.all_reduce never asks, and making and completing one costs
// a type, a future and a list per call.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "common/error.h"

namespace xccl::backend {

class XcclWork : public c10d::Work {
 public:
  // `timeout` bounds wait() without an explicit timeout: the operation itself is bounded by it,
  // so a waiter never outlives a failure that was never reported.
  XcclWork(int rank, c10d::OpType opType, const char* profilingTitle, uint64_t seq,
           std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout);

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override {}
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  uint64_t getSequencenumber() const override { return seq_; }
  int sourceRank() const override;

  // Called exactly once by whoever ran the operation. May run future callbacks inline.
  void succeed();
  // Fails with the torch exception for `kind` (torch_error.h): ValueError for a bad argument,
  // DistBackendError otherwise.
  void fail(ErrorKind kind, const std::string& message);
  // Fails with `error`, already a torch exception (another Work's, for a batch).
  void fail(std::exception_ptr error);
  void setSourceRank(int rank) { sourceRank_.store(rank); }
  // The output tensors, whether or not the operation has completed.
  const std::vector<at::Tensor>& outputs() const { return outputs_; }

 private:
  const uint64_t seq_;
  const std::vector<at::Tensor> outputs_;  // also keeps the buffers alive until completion
  const std::chrono::milliseconds timeout_;
  // Both under Work's mutex_: the future once asked for, and how the operation ended once it
  // has (a future asked for later is made complete).
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  bool settled_ = false;
  std::exception_ptr error_;
  std::atomic<int> sourceRank_{-1};
};

}  // namespace xccl::backend
