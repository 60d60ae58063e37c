// The CUDA/HIP runtime alias (docs/gpu.md, "ROCm"): every GPU source, kernels and host code alike,
// is written once against these names and builds as CUDA (nvcc, or a C++ compiler with CUDA's
// headers) or as HIP (clang/hipcc -x hip, or a C++ compiler with HIP's headers). Host code
// includes it alone (net/cuda_ipc/workspace.cc, the virtual-rank harness, the GPU tests);
// kernels/gpu.h adds the device headers on top. It lives in common/ because it is not the
// kernels': nothing here needs a kernel, and the host side must not depend on kernels/.
//
// One name per call, XCCL_RT(Malloc) for cudaMalloc/hipMalloc: HIP kept CUDA's names after the
// prefix for nearly everything, so no list of aliases can drift from the code using them. The few
// names that differ, and the runtime types the host passes around, are spelled gpuXxx below, in
// namespace xccl (so kernels::, net:: and testing:: code finds them unqualified).
//
// XCCL_GPU_HIP is decided here, once: clang's HIP mode defines __HIP__ for device code, and HIP's
// host headers need __HIP_PLATFORM_AMD__ (hipcc defines it; CMake's hip::host target gives it to
// the C++ compiler). No other file tests __HIP__, __HIP_PLATFORM_AMD__ or __CUDACC__, except
// kernels/partition.h, which only picks __host__ __device__ markers and must build without either
// runtime's headers.
#pragma once

#include <cstddef>

#include "common/error.h"

#if defined(__HIP__) || defined(__HIP_PLATFORM_AMD__)
#define XCCL_GPU_HIP 1
#include <hip/hip_runtime_api.h>
#define XCCL_RT(name) hip##name
#else
#define XCCL_GPU_HIP 0
#include <cuda_runtime_api.h>
#define XCCL_RT(name) cuda##name
#endif

namespace xccl {

using gpuError_t = XCCL_RT(Error_t);
using gpuStream_t = XCCL_RT(Stream_t);
using gpuEvent_t = XCCL_RT(Event_t);
constexpr gpuError_t gpuSuccess = XCCL_RT(Success);
inline gpuError_t gpuGetLastError() { return XCCL_RT(GetLastError)(); }
inline const char* gpuGetErrorString(gpuError_t e) { return XCCL_RT(GetErrorString)(e); }
inline const char* gpuGetErrorName(gpuError_t e) { return XCCL_RT(GetErrorName)(e); }

#if XCCL_GPU_HIP
// HIP names its device-properties struct with a _t and its attributes in full.
using gpuDeviceProp_t = hipDeviceProp_t;
using gpuDeviceAttr_t = hipDeviceAttribute_t;
constexpr gpuDeviceAttr_t gpuDevAttrMultiProcessorCount = hipDeviceAttributeMultiprocessorCount;
constexpr gpuDeviceAttr_t gpuDevAttrMaxThreadsPerMultiProcessor =
    hipDeviceAttributeMaxThreadsPerMultiProcessor;
constexpr gpuDeviceAttr_t gpuDevAttrMaxRegistersPerMultiprocessor =
    hipDeviceAttributeMaxRegistersPerMultiprocessor;
constexpr gpuDeviceAttr_t gpuDevAttrMaxRegistersPerBlock = hipDeviceAttributeMaxRegistersPerBlock;
// What the runtime returns from calls made while the process exits and it is being torn down
// (nothing to report then: the driver reclaims everything).
constexpr gpuError_t gpuErrorUnloading = hipErrorDeinitialized;
// Pinned host memory: hipHostAlloc/hipFreeHost are deprecated in favour of hipHostMalloc/
// hipHostFree, whose flags are spelled hipHostMalloc*.
constexpr unsigned gpuHostAllocDefault = hipHostMallocDefault;
constexpr unsigned gpuHostAllocMapped = hipHostMallocMapped;
constexpr unsigned gpuHostAllocPortable = hipHostMallocPortable;
inline gpuError_t gpuHostAlloc(void** p, size_t bytes, unsigned flags) {
  return hipHostMalloc(p, bytes, flags);
}
inline gpuError_t gpuFreeHost(void* p) { return hipHostFree(p); }
#else
using gpuDeviceProp_t = cudaDeviceProp;
using gpuDeviceAttr_t = cudaDeviceAttr;
constexpr gpuDeviceAttr_t gpuDevAttrMultiProcessorCount = cudaDevAttrMultiProcessorCount;
constexpr gpuDeviceAttr_t gpuDevAttrMaxThreadsPerMultiProcessor =
    cudaDevAttrMaxThreadsPerMultiProcessor;
constexpr gpuDeviceAttr_t gpuDevAttrMaxRegistersPerMultiprocessor =
    cudaDevAttrMaxRegistersPerMultiprocessor;
constexpr gpuDeviceAttr_t gpuDevAttrMaxRegistersPerBlock = cudaDevAttrMaxRegistersPerBlock;
constexpr gpuError_t gpuErrorUnloading = cudaErrorCudartUnloading;
constexpr unsigned gpuHostAllocDefault = cudaHostAllocDefault;
constexpr unsigned gpuHostAllocMapped = cudaHostAllocMapped;
constexpr unsigned gpuHostAllocPortable = cudaHostAllocPortable;
inline gpuError_t gpuHostAlloc(void** p, size_t bytes, unsigned flags) {
  return cudaHostAlloc(p, bytes, flags);
}
inline gpuError_t gpuFreeHost(void* p) { return cudaFreeHost(p); }
#endif

}  // namespace xccl

// Runs a CUDA/HIP runtime call and throws xccl::Error(kInternal) with the runtime's text when it
// fails. Never exits.
#define XCCL_GPU_CHECK(call)                                                              \
  do {                                                                                    \
    const ::xccl::gpuError_t xccl_gpu_rc_ = (call);                                       \
    if (xccl_gpu_rc_ != ::xccl::gpuSuccess) {                                             \
      XCCL_THROW(::xccl::ErrorKind::kInternal, #call, " failed: ",                        \
                 ::xccl::gpuGetErrorString(xccl_gpu_rc_));                                \
    }                                                                                     \
  } while (0)
