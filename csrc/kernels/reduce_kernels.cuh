// Reducing collective kernels: one-shot all-reduce, two-shot all-reduce, reduce-scatter.
// Launched through reduce_dispatch.cuh; also compiled for the CPU emulation in tests/cpp/gpu.
// Steps and bytes on the wire: docs/algorithms.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/barrier.cuh"
#include "kernels/block_ops.cuh"
#include "kernels/launch_checks.h"
#include "kernels/partition.h"

namespace xccl::kernels {

struct ReduceParams {
  DeviceHandle handle;
  void* output;
  size_t count;      // elements reduced into output
  size_t srcOffset;  // elements into every buffers[p] where this rank's input starts
  float preMul;
  float postDiv;
  // PREMUL_SUM's factor in this rank's device memory, used instead of preMul when non-null, so a
  // captured CUDA graph reads the factor tensor's value at each replay (no host sync at capture).
  const float* preMulOnDevice;
};
static_assert(std::is_trivially_copyable_v<ReduceParams>);

// The reduction's factors for this launch. The device factor is read once per thread at kernel
// start (every thread of the grid loads the same word: one broadcast load), never per element;
// it was written in stream order before the launch, so no ordering beyond the launch is needed.
template <ReduceKind K>
__device__ __forceinline__ Reducer<K> reducerFor(const ReduceParams& p) {
  return Reducer<K>{p.preMulOnDevice != nullptr ? *p.preMulOnDevice : p.preMul, p.postDiv};
}

template <int W>
__device__ __forceinline__ void sourcesAt(const DeviceHandle& h, size_t byteOffset,
                                          const char* (&src)[W]) {
#pragma unroll
  for (int p = 0; p < W; ++p) src[p] = static_cast<const char*>(h.buffers[p]) + byteOffset;
}

// One-shot all-reduce (srcOffset 0) and reduce-scatter (srcOffset rank * count): every rank pulls
// the same range from all W buffers and reduces it into its private output.
template <typename T, ReduceKind K, int W>
__global__ void __launch_bounds__(kThreadsPerBlock) directReduceKernel(ReduceParams p) {
  BlockBarrier barrier(p.handle);
  if (!barrier.begin()) return;
  const Reducer<K> red = reducerFor<K>(p);
  // Start: every rank's input is complete (it was written before that rank's launch, in its
  // stream order), and visible here through the release/acquire pairs of this barrier.
  if (!barrier.sync()) return;
  const Range part = blockPart(Range{0, p.count}, gridDim.x, blockIdx.x, sizeof(T));
  const char* src[W];
  sourcesAt<W>(p.handle, (p.srcOffset + part.begin) * sizeof(T), src);
  reduceRange<T, K, W>(src, static_cast<char*>(p.output) + part.begin * sizeof(T), part.size(),
                       red);
  // End: no peer still reads this rank's buffer once this returns, so the caller may reuse it.
  if (!barrier.sync()) return;
  barrier.end();
}

// Two-shot all-reduce. Stage 1: rank r reduces slice r of all buffers and writes it back into
// slice r of its own buffer (only rank r ever reads slice r during stage 1, so in place is safe).
// Stage 2: every rank copies slice s from rank s's buffer, for all s. Block b handles the same
// part of every slice in both stages (blockPart depends only on sizes), so block b's flag pair
// orders exactly the writes its stage-2 reads depend on.
template <typename T, ReduceKind K, int W>
__global__ void __launch_bounds__(kThreadsPerBlock) twoShotKernel(ReduceParams p) {
  BlockBarrier barrier(p.handle);
  if (!barrier.begin()) return;
  const Reducer<K> red = reducerFor<K>(p);
  if (!barrier.sync()) return;  // start: all inputs complete (as in directReduceKernel)
  const int rank = p.handle.rank;
  {
    const Range slice = twoShotSlice(p.count, W, rank, sizeof(T));
    const Range part = blockPart(slice, gridDim.x, blockIdx.x, sizeof(T));
    const char* src[W];
    sourcesAt<W>(p.handle, part.begin * sizeof(T), src);
    char* own = static_cast<char*>(p.handle.buffers[rank]) + part.begin * sizeof(T);
    reduceRange<T, K, W>(src, own, part.size(), red);
  }
  // Middle: every rank's reduced slice part is published (the release covers this block's stage-1
  // stores), and no rank still reads an unreduced slice that stage 2 may overwrite in place.
  if (!barrier.sync()) return;
#pragma unroll 1
  for (int j = 0; j < W; ++j) {
    const int s = (rank + j) % W;  // start at a different peer on every rank: spread the links
    const Range part =
        blockPart(twoShotSlice(p.count, W, s, sizeof(T)), gridDim.x, blockIdx.x, sizeof(T));
    const char* src = static_cast<const char*>(p.handle.buffers[s]) + part.begin * sizeof(T);
    char* dst = static_cast<char*>(p.output) + part.begin * sizeof(T);
    if (src != dst) copyRange(src, dst, part.size() * sizeof(T));
  }
  // End: no peer still reads this rank's reduced slice.
  if (!barrier.sync()) return;
  barrier.end();
}

}  // namespace xccl::kernels
