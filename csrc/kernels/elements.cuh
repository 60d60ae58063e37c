// Element types of the reducing kernels and their 16-byte vector packing, written only in terms
// of primitives.cuh (so the CPU emulation in tests/cpp/gpu runs this exact code).
#pragma once

#include <cstdint>

#include "kernels/primitives.cuh"

namespace xccl::kernels {

// Storage types of the 16-bit floats: raw bits, so the same code runs on both vendors and the
// packing below is explicit.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(Half v) { return floatFromHalfBits(v.bits); }
__device__ __forceinline__ float toFloat(BFloat16 v) {
  return floatFromBits(static_cast<uint32_t>(v.bits) << 16);  // exact: bf16 is truncated fp32
}

template <typename T>
__device__ __forceinline__ T fromFloat(float v);
template <>
__device__ __forceinline__ float fromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ Half fromFloat<Half>(float v) {
  return Half{halfBitsFromFloatRn(v)};
}
// Round to nearest even by hand rather than with the vendor intrinsic: identical on CUDA and
// ROCm 5.x (which has no bf16 header), and cheap next to the memory traffic. NaN stays a quiet NaN.
template <>
__device__ __forceinline__ BFloat16 fromFloat<BFloat16>(float v) {
  const uint32_t bits = bitsFromFloat(v);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return BFloat16{static_cast<uint16_t>((bits >> 16) | 0x40)};
  }
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return BFloat16{static_cast<uint16_t>(rounded >> 16)};
}

// A 16-byte vector as fp32 lanes: 4 floats or 8 halves/bfloat16s. Element 2i of a 16-bit pack is
// the low half of 32-bit word i (both vendors' GPUs are little-endian).
template <typename T>
struct Lanes {
  static constexpr int kCount = static_cast<int>(16 / sizeof(T));
};

template <typename T>
__device__ __forceinline__ void unpack(uint4 raw, float (&out)[Lanes<T>::kCount]) {
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = floatFromBits(words[i]);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = toFloat(T{static_cast<uint16_t>(words[i] & 0xffffu)});
      out[2 * i + 1] = toFloat(T{static_cast<uint16_t>(words[i] >> 16)});
    }
  }
}

template <typename T>
__device__ __forceinline__ uint4 pack(const float (&in)[Lanes<T>::kCount]) {
  uint32_t words[4];
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) words[i] = bitsFromFloat(in[i]);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      words[i] = static_cast<uint32_t>(fromFloat<T>(in[2 * i]).bits) |
                 (static_cast<uint32_t>(fromFloat<T>(in[2 * i + 1]).bits) << 16);
    }
  }
  uint4 raw;
  raw.x = words[0];
  raw.y = words[1];
  raw.z = words[2];
  raw.w = words[3];
  return raw;
}

}  // namespace xccl::kernels
