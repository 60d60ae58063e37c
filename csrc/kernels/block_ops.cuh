// What one block does to its range once the barrier allows it: reduce W ranks' elements into one
// destination, or copy bytes. Both split the range into scalar head, 16-byte vectors and scalar
// tail so any count and any element-aligned pointer works (reductions through partition.h's
// splitForVectors; copies also when source and destination disagree mod 16, see copyRange).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/elements.cuh"
#include "kernels/launch_checks.h"
#include "kernels/partition.h"

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

// Bytes [4 * Q + bits / 8, + 16) of the 32-byte little-endian concatenation lo:hi, i.e. the 16
// bytes of an unaligned source vector rebuilt from the two aligned vectors it straddles. Q is a
// template parameter so every word index is a constant (registers, no local-memory array); each
// word is one 64-bit funnel shift (shf.r.clamp on CUDA, v_alignbit_b32 on AMD).
template <int Q>
__device__ __forceinline__ uint4 alignVector(const uint4& lo, const uint4& hi, unsigned bits) {
  const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const auto funnel = [&](int k) {
    return static_cast<uint32_t>(((static_cast<uint64_t>(w[k + 1]) << 32) | w[k]) >> bits);
  };
  uint4 out;
  out.x = funnel(Q);
  out.y = funnel(Q + 1);
  out.z = funnel(Q + 2);
  out.w = funnel(Q + 3);
  return out;
}

// dst vector v (16-byte aligned) = bytes [4 * Q + bits / 8, + 16) of the aligned source vectors
// v and v + 1 at alignedSrc. Neighbouring threads load neighbouring vectors (coalesced); the
// second load of each pair is the next thread's first, so it mostly hits L1.
template <int Q>
__device__ void copyShiftedVectors(const char* alignedSrc, char* dst, size_t vectors,
                                   unsigned bits) {
  const size_t threads = blockDim.x;
  constexpr int kCopyUnroll = 2;
  for (size_t v = threadIdx.x; v < vectors; v += threads * kCopyUnroll) {
    uint4 lo[kCopyUnroll], hi[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) {
      const size_t vu = v + u * threads;
      if (vu < vectors) {
        lo[u] = ldVector(alignedSrc + vu * kVectorBytes);
        hi[u] = ldVector(alignedSrc + (vu + 1) * kVectorBytes);
      }
    }
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) {
      const size_t vu = v + u * threads;
      if (vu < vectors) stVector(dst + vu * kVectorBytes, alignVector<Q>(lo[u], hi[u], bits));
    }
  }
}

// dst[0..bytes) = src[0..bytes). Never called with src == dst (the kernels skip in-place chunks).
// A scalar head aligns dst; every store after it is a 16-byte vector. Loads are 16-byte vectors
// too: aligned ones when src then shares dst's alignment, else each output vector is rebuilt from
// the two aligned source vectors it straddles (alignVector), so a copy between buffers that
// disagree mod 16 never degrades to byte accesses. Only aligned vectors lying wholly inside
// [src, src + bytes) are loaded (no over-read into a neighbour's bytes), which costs at most one
// more vector of scalar head and one of scalar tail.
__device__ inline void copyRange(const char* src, char* dst, size_t bytes) {
  const size_t threads = blockDim.x;
  size_t head = (kVectorBytes - misalignmentOf(dst)) % kVectorBytes;
  const int shift = misalignmentOf(src + head);  // the same for every later dst vector
  // Shifted vector v reads from `shift` bytes before its first source byte: the first one's
  // aligned source vector must not start before src.
  if (shift != 0 && head < static_cast<size_t>(shift)) head += kVectorBytes;
  if (head > bytes) head = bytes;
  const size_t rest = bytes - head;
  size_t vectors = rest / kVectorBytes;
  // ... and the last one reads 16 - shift bytes past its own end, which must stay inside.
  if (shift != 0 && vectors > 0 && rest % kVectorBytes < kVectorBytes - shift) --vectors;

  for (size_t i = threadIdx.x; i < head; i += threads) dst[i] = src[i];
  const char* vsrc = src + head;
  char* vdst = dst + head;
  if (shift == 0) {
    constexpr int kCopyUnroll = 4;
    for (size_t v = threadIdx.x; v < vectors; v += threads * kCopyUnroll) {
      uint4 raw[kCopyUnroll];
#pragma unroll
      for (int u = 0; u < kCopyUnroll; ++u) {
        const size_t vu = v + u * threads;
        if (vu < vectors) raw[u] = ldVector(vsrc + vu * kVectorBytes);
      }
#pragma unroll
      for (int u = 0; u < kCopyUnroll; ++u) {
        const size_t vu = v + u * threads;
        if (vu < vectors) stVector(vdst + vu * kVectorBytes, raw[u]);
      }
    }
  } else if (vectors > 0) {
    // One branch per copy, uniform across the block: the word offset becomes a template constant.
    const char* aligned = vsrc - shift;
    const unsigned bits = 8u * static_cast<unsigned>(shift % 4);
    switch (shift / 4) {
      case 0: copyShiftedVectors<0>(aligned, vdst, vectors, bits); break;
      case 1: copyShiftedVectors<1>(aligned, vdst, vectors, bits); break;
      case 2: copyShiftedVectors<2>(aligned, vdst, vectors, bits); break;
      default: copyShiftedVectors<3>(aligned, vdst, vectors, bits); break;
    }
  }
  const size_t tailStart = head + vectors * kVectorBytes;
  for (size_t i = threadIdx.x; tailStart + i < bytes; i += threads) {
    dst[tailStart + i] = src[tailStart + i];
  }
}

}  // namespace xccl::kernels
