// Host launch API of the collective kernels. Plain C++ (no CUDA/HIP headers): the backend includes
// it from CPU-compiled code and calls the launchers only where XCCL_WITH_CUDA is 1 (they are
// defined in the .cu sources, which exist only in GPU builds).
//
// Contract shared by every launcher:
//  - Every rank of the handle launches the same collective with identical Args except handle.rank
//    and the rank-local pointers, in the same order, on one stream per handle (flags and epochs
//    are per handle; two streams sharing a handle can deadlock, as in torch issue #189228).
//  - Inputs live in the peer-visible handle.buffers and must be complete in stream order before
//    the launch (e.g. an eager copy-in on the same stream); the kernel's first barrier makes every
//    rank's input visible to all, and its last barrier keeps this rank's buffer alive until no peer
//    reads it any more, so the caller may reuse it as soon as the kernel ends in stream order.
//  - count == 0 launches nothing. Element counts need no alignment: 16-byte vector accesses are
//    used where all pointers share an alignment, scalar heads and tails elsewhere.
//  - Bad arguments throw xccl::Error(kInvalidArgument) before anything is enqueued; a failed launch
//    throws kInternal. Device-side failures (a peer never arrived) land in *handle.error.
//  - `stream` is a cudaStream_t / hipStream_t (nullptr: the legacy default stream).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/types.h"
#include "kernels/device_handle.h"

namespace xccl::kernels {

enum class Algorithm : uint8_t {
  kOneShot,  // every rank pulls all inputs and reduces everything: 1 sync round, (W-1)*S read
  kTwoShot,  // reduce-scatter then all-gather: 2 sync rounds, 2*(W-1)/W*S read
};

// Launch-shape options shared by all launchers; must be identical on every rank.
struct LaunchShape {
  // Upper bound on blocks per launch (0: kDefaultMaxBlocks; capped at kMaxBlocks). With virtual
  // ranks all ranks' blocks must be resident at once: pass at most (SM count / world size).
  int maxBlocks = 0;
};

// What the two reductions (all-reduce, reduce-scatter) take. dtype: kFloat32, kFloat16,
// kBFloat16. op: kSum, kAvg, kPreMulSum (each input times preMulFactor before the sum), kMin,
// kMax (NaN propagates). Accumulation in fp32, over ranks in rank order.
struct ReductionArgs {
  DeviceHandle handle;
  void* output = nullptr;
  size_t count = 0;  // all-reduce: elements; reduce-scatter: elements per rank (output size)
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  float preMulFactor = 1.0f;
  // PREMUL_SUM only: when non-null, the kernel reads the factor from this float in this rank's
  // device memory (e.g. a 1-element float32 tensor, complete in stream order before the launch)
  // instead of preMulFactor, so capture into a CUDA graph needs no host read of the factor.
  const float* preMulFactorOnDevice = nullptr;
  LaunchShape shape;
};

// out = reduce over ranks p of buffers[p][0..count).
// One-shot: output must not overlap buffers[rank] (peers read it while this rank writes output).
// Two-shot: reduces this rank's slice in place inside buffers[rank] (so buffers[rank] is clobbered)
// and then gathers; output may equal buffers[rank] (in place) but must not partially overlap it.
struct AllReduceArgs : ReductionArgs {
  Algorithm algorithm = Algorithm::kOneShot;
};
void launchAllReduce(const AllReduceArgs& args, void* stream);

// buffers[p] holds worldSize * count elements; out[0..count) = reduce over p of
// buffers[p][rank * count ..]. output may be exactly buffers[rank] + rank * count (in place) but
// must not overlap the rest of buffers[rank]. A type of its own (not ReductionArgs) so that an
// AllReduceArgs never reaches this launcher by slicing.
struct ReduceScatterArgs : ReductionArgs {};
void launchReduceScatter(const ReduceScatterArgs& args, void* stream);

// buffers[p] holds count elements; out[p * count ..] = buffers[p][0..count). Any dtype (a byte
// copy). In place when buffers[rank] == output + rank * count; no other overlap.
struct AllGatherArgs {
  DeviceHandle handle;
  void* output = nullptr;
  size_t count = 0;  // elements per rank (input size)
  DataType dtype = DataType::kFloat32;
  LaunchShape shape;
};
void launchAllGather(const AllGatherArgs& args, void* stream);

// out[0..count) = buffers[root][0..count) on every rank; only buffers[root] is read (the others
// may be null). On the root, output may equal buffers[root] (nothing to copy).
struct BroadcastArgs {
  DeviceHandle handle;
  void* output = nullptr;
  size_t count = 0;
  DataType dtype = DataType::kFloat32;
  int root = 0;
  LaunchShape shape;
};
void launchBroadcast(const BroadcastArgs& args, void* stream);

// buffers[p] holds worldSize * count elements, chunk q destined to rank q;
// out[p * count ..] = buffers[p][rank * count ..]. Every peer link is driven at once: block b of
// rank r pulls from peer (r + b) mod worldSize. output must not overlap buffers[rank].
struct AllToAllArgs {
  DeviceHandle handle;
  void* output = nullptr;
  size_t count = 0;  // elements per (sender, receiver) pair
  DataType dtype = DataType::kFloat32;
  LaunchShape shape;
};
void launchAllToAll(const AllToAllArgs& args, void* stream);

}  // namespace xccl::kernels
