// What one block does to its range once the barrier allows it: reduce W ranks' elements into one
// destination, or copy bytes. Both split the range into scalar head, 16-byte vectors and scalar
// tail (partition.h) so any count and any element-aligned pointer works.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/partition.h"
#include "kernels/plan.h"
#include "kernels/elements.cuh"

namespace xccl::kernels {

// Vectors in flight per thread per peer: more outstanding loads hide NVLink/xGMI latency.
constexpr int kUnroll = 2;

// The reduction of one element across ranks, in fp32. The order is always rank 0, 1, ..., W-1 on
// every rank (never "own rank first"), so all ranks produce bit-identical results (vLLM's
// one-shot makes the same choice), and the CPU reference reproduces them exactly.
template <ReduceKind K>
struct Reducer {
  float preMul;
  float postDiv;

  __device__ __forceinline__ float first(float x) const {
    if constexpr (K == ReduceKind::kSum) return preMul == 1.0f ? x : mulRn(x, preMul);
    return x;
  }
  __device__ __forceinline__ float combine(float acc, float x) const {
    if constexpr (K == ReduceKind::kSum) return addRn(acc, preMul == 1.0f ? x : mulRn(x, preMul));
    // NaN-propagating min/max (torch semantics), written so equal inputs keep the earlier rank.
    if constexpr (K == ReduceKind::kMin) return (x < acc || x != x) ? x : acc;
    return (x > acc || x != x) ? x : acc;
  }
  __device__ __forceinline__ float finish(float acc) const {
    if constexpr (K == ReduceKind::kSum) return postDiv == 1.0f ? acc : divRn(acc, postDiv);
    return acc;
  }
};

// dst[i] = reduce over p of src[p][i] for i in [0, count), where src[p] and dst already point at
// the range start. The whole block participates; threads stride by blockDim.x so each warp's
// accesses are contiguous.
template <typename T, ReduceKind K, int W>
__device__ void reduceRange(const char* const (&src)[W], char* dst, size_t count,
                            const Reducer<K>& red) {
  int misalignment = misalignmentOf(dst);
#pragma unroll
  for (int p = 0; p < W; ++p) misalignment = mergeMisalignment(misalignment, src[p]);
  const VectorSplit split = splitForVectors(misalignment, count, sizeof(T));
  const size_t threads = blockDim.x;

  auto scalar = [&](size_t i) {
    float acc = red.first(toFloat(reinterpret_cast<const T*>(src[0])[i]));
#pragma unroll
    for (int p = 1; p < W; ++p) {
      acc = red.combine(acc, toFloat(reinterpret_cast<const T*>(src[p])[i]));
    }
    reinterpret_cast<T*>(dst)[i] = fromFloat<T>(red.finish(acc));
  };
  for (size_t i = threadIdx.x; i < split.head; i += threads) scalar(i);

  constexpr int kLanes = Lanes<T>::kCount;
  const size_t headBytes = split.head * sizeof(T);
  for (size_t v = threadIdx.x; v < split.vectors; v += threads * kUnroll) {
    // Issue all W * kUnroll loads before any arithmetic.
    uint4 raw[kUnroll][W];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t vu = v + u * threads;
      if (vu < split.vectors) {
#pragma unroll
        for (int p = 0; p < W; ++p) raw[u][p] = ldVector(src[p] + headBytes + vu * kVectorBytes);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const size_t vu = v + u * threads;
      if (vu >= split.vectors) break;
      float acc[kLanes];
      float in[kLanes];
      unpack<T>(raw[u][0], acc);
#pragma unroll
      for (int l = 0; l < kLanes; ++l) acc[l] = red.first(acc[l]);
#pragma unroll
      for (int p = 1; p < W; ++p) {
        unpack<T>(raw[u][p], in);
#pragma unroll
        for (int l = 0; l < kLanes; ++l) acc[l] = red.combine(acc[l], in[l]);
      }
#pragma unroll
      for (int l = 0; l < kLanes; ++l) acc[l] = red.finish(acc[l]);
      stVector(dst + headBytes + vu * kVectorBytes, pack<T>(acc));
    }
  }

  const size_t tailStart = split.head + split.vectors * kLanes;
  for (size_t i = threadIdx.x; i < split.tail; i += threads) scalar(tailStart + i);
}

// dst[0..bytes) = src[0..bytes), vectorised where both share an alignment. Never called with
// src == dst (the kernels skip in-place chunks).
__device__ inline void copyRange(const char* src, char* dst, size_t bytes) {
  const VectorSplit split = splitForVectors(mergeMisalignment(misalignmentOf(dst), src), bytes, 1);
  const size_t threads = blockDim.x;
  for (size_t i = threadIdx.x; i < split.head; i += threads) dst[i] = src[i];
  const char* vsrc = src + split.head;
  char* vdst = dst + split.head;
  constexpr int kCopyUnroll = 4;
  for (size_t v = threadIdx.x; v < split.vectors; v += threads * kCopyUnroll) {
    uint4 raw[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) {
      const size_t vu = v + u * threads;
      if (vu < split.vectors) raw[u] = ldVector(vsrc + vu * kVectorBytes);
    }
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) {
      const size_t vu = v + u * threads;
      if (vu < split.vectors) stVector(vdst + vu * kVectorBytes, raw[u]);
    }
  }
  const size_t tailStart = split.head + split.vectors * kVectorBytes;
  for (size_t i = threadIdx.x; i < split.tail; i += threads) {
    dst[tailStart + i] = src[tailStart + i];
  }
}

}  // namespace xccl::kernels
