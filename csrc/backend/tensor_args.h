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

// CPU, dense, contiguous: what this backend moves today. `what` names the argument.
void checkTensor(const at::Tensor& tensor, const char* op, const char* what);
// Exactly one tensor (one device per process), checked.
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op);
void checkSameShapeAndType(const at::Tensor& a, const at::Tensor& b, const char* op);
void checkRoot(int64_t root, int size, const char* op);
void checkPeer(int peer, int rank, int size, const char* op);

// The view used to reduce `tensor` with `op`; ValueError if the dtype cannot be reduced so.
ElementView reduceView(const at::Tensor& tensor, const ReduceSpec& spec, const char* op);
ReduceSpec toReduceSpec(const c10d::ReduceOp& op, const char* opName);

// Multiplies `tensor` in place by PREMUL_SUM's factor, if any.
void applyFactor(at::Tensor& tensor, const ReduceSpec& spec);

size_t byteSize(const at::Tensor& tensor);

}  // namespace xccl::backend
