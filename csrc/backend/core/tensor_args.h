// The one tensor-argument checker, and the conversions at the torch boundary, for both sides
// (side.h). Every check runs on the caller's thread before any traffic and raises ValueError, so
// a bad call leaves the group usable. A side says where its tensors must live (`home`): the CPU,
// or the GPU side's one CUDA device; the messages say which rule was broken on which side.
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

// Defined, dense, contiguous and on `home`: what a side moves. CPU tensors for the CPU side; for
// the GPU side, tensors on its device (one device per group, like NCCL's: the workspace and the
// comm stream live there). `what` names the argument.
void checkTensor(const at::Tensor& tensor, const char* op, const char* what,
                 c10::Device home = c10::Device(at::kCPU));
// Exactly one tensor (one device per process), checked.
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op,
                         c10::Device home = c10::Device(at::kCPU));
void checkSameShapeAndType(const at::Tensor& a, const at::Tensor& b, const char* op);
// The input and output of a call have one dtype.
void checkSameDtype(const at::Tensor& input, const at::Tensor& output, const char* op);
// Every tensor of `tensors` has the first one's dtype.
void checkSameDtypes(const std::vector<at::Tensor>& tensors, const char* op);
// The flat pair of all_gather_into_tensor / reduce_scatter_tensor: one dtype, and `whole` holds
// `size` times the elements of `part` (the names say which argument is which in the message).
void checkFlatPair(const at::Tensor& whole, const char* wholeName, const at::Tensor& part,
                   const char* partName, int size, const char* op);
void checkRoot(int64_t root, int size, const char* op);
void checkPeer(int peer, int rank, int size, const char* op);
// alltoall_base's split sizes (rows of dim 0 of `t`, the argument named `what`) as byte lengths,
// one per rank; empty splits mean equal parts.
std::vector<size_t> alltoallSplitBytes(const at::Tensor& t, const std::vector<int64_t>& splits,
                                       int size, const char* what);

// The view used to reduce `tensor` with `op`; ValueError if the dtype cannot be reduced so.
ElementView reduceView(const at::Tensor& tensor, const ReduceSpec& spec, const char* op);
// Reads PREMUL_SUM's factor on the host: a CUDA tensor factor costs a device sync (.item()).
ReduceSpec toReduceSpec(const c10d::ReduceOp& op, const char* opName);
// The reduction alone, its factor unread: what a route decision needs (no device sync, so a
// CUDA tensor factor stays capturable). The GPU side reads factors only through toGpuReduce.
ReduceOp reduceOpOf(const c10d::ReduceOp& op, const char* opName);

// A reduction on the GPU side: ReduceSpec plus PREMUL_SUM's factor as a 1-element float32 tensor
// on the group's device when the caller gave a CUDA tensor factor, so the kernels read it on the
// device (no .item(), no host sync: capturable). `spec.factor` is then empty.
struct GpuReduce {
  ReduceSpec spec;
  at::Tensor deviceFactor;  // undefined unless PREMUL_SUM with a CUDA tensor factor
};
// toReduceSpec for the GPU side on `device`: a factor that is a number or a CPU tensor is read on
// the host (no device sync); a CUDA tensor factor is copied to `device` on the caller's stream.
GpuReduce toGpuReduce(const c10d::ReduceOp& op, const char* opName, int device);

// Whether NCCL/RCCL implement the reduction (they have no bitwise ones).
inline bool vendorReduces(ReduceOp op) {
  return op != ReduceOp::kBand && op != ReduceOp::kBor && op != ReduceOp::kBxor;
}

// Multiplies `tensor` in place by PREMUL_SUM's factor, if any.
void applyFactor(at::Tensor& tensor, const ReduceSpec& spec);

size_t byteSize(const at::Tensor& tensor);

// Every tensor of a call's arguments, by address (which side a call goes to; the GPU side's
// host route swaps them for host copies).
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
