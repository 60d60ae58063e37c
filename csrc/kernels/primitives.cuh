// Device primitives, each named after what it emits, with the CUDA and HIP spellings side by
// side. Memory-model references: PTX ISA "Memory Consistency Model" (release / acquire patterns,
// causality order) for CUDA; the HIP/HSA scoped model (__hip_atomic_* with
// __HIP_MEMORY_SCOPE_SYSTEM) for ROCm, where both sides of every cross-GPU pair must use SYSTEM
// scope (aiter PR #2890 / #4786: DEVICE-scope loads of remote flags spun on stale values).
#pragma once

#include <cstdint>

#include "kernels/gpu.h"

namespace xccl::kernels {

// st.release.sys: every write this thread has performed, or has observed through a barrier
// (PTX causality order is cumulative over bar.sync), becomes visible to any thread of any GPU
// that reads this value with an acquire at system scope.
__device__ __forceinline__ void stReleaseSys(uint32_t* address, uint32_t value) {
#if XCCL_GPU_HIP
  __hip_atomic_store(address, value, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(address), "r"(value) : "memory");
#endif
}

// ld.acquire.sys: pairs with stReleaseSys; reads issued after it (and, through a following block
// barrier, by the other threads of the block) see everything the releasing side published.
__device__ __forceinline__ uint32_t ldAcquireSys(const uint32_t* address) {
  uint32_t value;
#if XCCL_GPU_HIP
  value = __hip_atomic_load(address, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
#endif
  return value;
}

// ld.relaxed.sys: a fresh value without ordering; for polling the error word, which orders
// nothing (a set error only makes the kernel give up).
__device__ __forceinline__ uint32_t ldRelaxedSys(const uint32_t* address) {
  uint32_t value;
#if XCCL_GPU_HIP
  value = __hip_atomic_load(address, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
#endif
  return value;
}

// atom.or.sys (relaxed): records error bits; several blocks may record at once, hence an atomic,
// and system scope so a host thread polling mapped memory sees it while the kernel still runs.
__device__ __forceinline__ void atomicOrSys(uint32_t* address, uint32_t bits) {
#if XCCL_GPU_HIP
  __hip_atomic_fetch_or(address, bits, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  atomicOr_system(address, bits);
#endif
}

// Nanoseconds of a constant-rate timer, for bounding spins. CUDA: %globaltimer. ROCm:
// s_memrealtime, which counts at the constant 100 MHz "wall clock" on gfx90a/gfx94x (the rate
// hipDeviceAttributeWallClockRate reports); only differences are used.
__device__ __forceinline__ uint64_t globalTimerNs() {
#if XCCL_GPU_HIP
  return __builtin_amdgcn_s_memrealtime() * 10;
#else
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
#endif
}

// 16-byte global load/store (ld.global.v4.u32 / global_load_dwordx4); pointers must be 16-byte
// aligned, which partition.h's splitForVectors guarantees for the vector part of a range.
__device__ __forceinline__ uint4 ldVector(const void* address) {
  return *static_cast<const uint4*>(address);
}
__device__ __forceinline__ void stVector(void* address, uint4 value) {
  *static_cast<uint4*>(address) = value;
}

// IEEE arithmetic with explicit rounding: the _rn intrinsics are never contracted into FMAs, so
// every rank (and the CPU reference) computes bit-identical sums.
__device__ __forceinline__ float addRn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float mulRn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float divRn(float a, float b) { return __fdiv_rn(a, b); }

// Bit casts and IEEE binary16 conversions (cvt.f32.f16 / cvt.rn.f16.f32, v_cvt_f32_f16 /
// v_cvt_f16_f32 with round to nearest even).
__device__ __forceinline__ float floatFromBits(uint32_t bits) { return __uint_as_float(bits); }
__device__ __forceinline__ uint32_t bitsFromFloat(float v) { return __float_as_uint(v); }
__device__ __forceinline__ float floatFromHalfBits(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}
__device__ __forceinline__ uint16_t halfBitsFromFloatRn(float v) {
  return __half_as_ushort(__float2half_rn(v));
}

}  // namespace xccl::kernels
