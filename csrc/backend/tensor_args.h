// Checks and conversions at the torch boundary. Every check runs on the caller's thread before
// any traffic and raises ValueError, so a bad call leaves the group usable.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>
#include <string>
#include <vector>

#include "common/types.h"

namespace xccl::backend {

// How a tensor's bytes are reduced: complex tensors reduce as pairs of real numbers.
struct ElementView {
  DataType type;
  size_t count;  // in elements of `type`
};

// A reduction as the algorithms see it, plus PREMUL_SUM's factor (applied before the sum).
struct ReduceSpec {
  ReduceOp op;
  std::optional<double> factor;
};

// CPU, dense, contiguous: what the CPU path moves (CUDA tensors go to gpu_ops.h before any
// check). `what` names the argument.
void checkTensor(const at::Tensor& tensor, const char* op, const char* what);
// Exactly one tensor (one device per process), checked.
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op);
void checkSameShapeAndType(const at::Tensor& a, const at::Tensor& b, const char* op);
// The flat pair of all_gather_into_tensor / reduce_scatter_tensor: one dtype, and `whole` holds
// `size` times the elements of `part` (the names say which argument is which in the message).
void checkFlatPair(const at::Tensor& whole, const char* wholeName, const at::Tensor& part,
                   const char* partName, int size, const char* op);
void checkRoot(int64_t root, int size, const char* op);
void checkPeer(int peer, int rank, int size, const char* op);

// The view used to reduce `tensor` with `op`; ValueError if the dtype cannot be reduced so.
ElementView reduceView(const at::Tensor& tensor, const ReduceSpec& spec, const char* op);
ReduceSpec toReduceSpec(const c10d::ReduceOp& op, const char* opName);

// Whether NCCL/RCCL implement the reduction (they have no bitwise ones).
inline bool vendorReduces(ReduceOp op) {
  return op != ReduceOp::kBand && op != ReduceOp::kBor && op != ReduceOp::kBxor;
}

// Multiplies `tensor` in place by PREMUL_SUM's factor, if any.
void applyFactor(at::Tensor& tensor, const ReduceSpec& spec);

size_t byteSize(const at::Tensor& tensor);

// Every tensor of a call's arguments, by address (for the GPU side, gpu_ops.h).
inline std::vector<at::Tensor*> pointers(at::Tensor& tensor) { return {&tensor}; }
inline std::vector<at::Tensor*> pointers(std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor*> out;
  for (auto& t : tensors) out.push_back(&t);
  return out;
}
inline std::vector<at::Tensor*> pointers(std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor*> out;
  for (auto& list : lists) {
    for (auto& t : list) out.push_back(&t);
  }
  return out;
}
template <typename A, typename B>
std::vector<at::Tensor*> pointers(A& a, B& b) {
  std::vector<at::Tensor*> out = pointers(a);
  for (at::Tensor* t : pointers(b)) out.push_back(t);
  return out;
}

}  // namespace xccl::backend
