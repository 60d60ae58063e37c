// Reducing collective kernels: one-shot all-reduce, two-shot all-reduce, reduce-scatter.
// Launched through reduce_dispatch.cuh; also compiled for the CPU emulation in tests/cpp/gpu.
// Steps and bytes on the wire: docs/algorithms.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/barrier.cuh"
#include "kernels/block_ops.cuh"
#include "kernels/partition.h"
#include "kernels/plan.h"

namespace xccl::kernels {

struct ReduceParams {
  DeviceHandle handle;
  void* output;
  size_t count;      // elements reduced into output
  size_t srcOffset;  // elements into every buffers[p] where this rank's input starts
  float preMul;
  float postDiv;
};
static_assert(std::is_trivially_copyable_v<ReduceParams>);

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
  // Start: every rank's input is complete (it was written before that rank's launch, in its
  // stream order), and visible here through the release/acquire pairs of this barrier.
  if (!barrier.sync()) return;
  const Range part = blockPart(Range{0, p.count}, gridDim.x, blockIdx.x, sizeof(T));
  const char* src[W];
  sourcesAt<W>(p.handle, (p.srcOffset + part.begin) * sizeof(T), src);
  reduceRange<T, K, W>(src, static_cast<char*>(p.output) + part.begin * sizeof(T), part.size(),
                       Reducer<K>{p.preMul, p.postDiv});
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
  if (!barrier.sync()) return;  // start: all inputs complete (as in directReduceKernel)
  const int rank = p.handle.rank;
  {
    const Range slice = twoShotSlice(p.count, W, rank, sizeof(T));
    const Range part = blockPart(slice, gridDim.x, blockIdx.x, sizeof(T));
    const char* src[W];
    sourcesAt<W>(p.handle, part.begin * sizeof(T), src);
    char* own = static_cast<char*>(p.handle.buffers[rank]) + part.begin * sizeof(T);
    reduceRange<T, K, W>(src, own, part.size(), Reducer<K>{p.preMul, p.postDiv});
  }
  // Middle: every rank's reduced slice part is published (the release covers this block's stage-1
  // stores), and no rank still reads an unreduced slice that stage 2 may overwrite in place.
  if (!barrier.sync()) return;
#pragma unroll 1
  for (int j = 0; j < W; ++j) {
    const int s = (rank + j) % W;  // start at a different peer on every rank: spread the links
    const Range part = blockPart(twoShotSlice(p.count, W, s, sizeof(T)), gridDim.x, blockIdx.x,
                                 sizeof(T));
    const char* src = static_cast<const char*>(p.handle.buffers[s]) + part.begin * sizeof(T);
    char* dst = static_cast<char*>(p.output) + part.begin * sizeof(T);
    if (src != dst) copyRange(src, dst, part.size() * sizeof(T));
  }
  // End: no peer still reads this rank's reduced slice.
  if (!barrier.sync()) return;
  barrier.end();
}

}  // namespace xccl::kernels
