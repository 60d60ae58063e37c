// The runtime-API half of the CUDA/HIP alias (DESIGN.md section 5), safe for host code compiled by
// a plain C++ compiler: net/cuda_ipc's workspace calls the runtime through it, and kernels/gpu.h
// adds the device headers on top. One name per call, XCCL_RT(Malloc) for cudaMalloc/hipMalloc:
// HIP kept CUDA's names after the prefix for everything used here, so no list of aliases can
// drift from the code using them.
//
// XCCL_GPU_HIP is decided here, once: clang's HIP mode defines __HIP__ for device code, and HIP's
// host headers need __HIP_PLATFORM_AMD__ (hipcc defines it; a C++ compiler gets it from the build).
// No other file tests __HIP__, __HIP_PLATFORM_AMD__ or __CUDACC__ (partition.h only picks
// __host__ __device__ markers).
#pragma once

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

namespace xccl::kernels {

using gpuError_t = XCCL_RT(Error_t);
using gpuStream_t = XCCL_RT(Stream_t);
constexpr gpuError_t gpuSuccess = XCCL_RT(Success);
inline gpuError_t gpuGetLastError() { return XCCL_RT(GetLastError)(); }
inline const char* gpuGetErrorString(gpuError_t e) { return XCCL_RT(GetErrorString)(e); }
inline const char* gpuGetErrorName(gpuError_t e) { return XCCL_RT(GetErrorName)(e); }

// What the runtime returns from calls made while the process exits and it is being torn down
// (nothing to report then: the driver reclaims everything).
#if XCCL_GPU_HIP
constexpr gpuError_t gpuErrorUnloading = hipErrorDeinitialized;
#else
constexpr gpuError_t gpuErrorUnloading = cudaErrorCudartUnloading;
#endif

}  // namespace xccl::kernels

// Runs a CUDA/HIP runtime call and throws xccl::Error(kInternal) with the runtime's text when it
// fails. Never exits (STYLE.md item 6).
#define XCCL_GPU_CHECK(call)                                                                \
  do {                                                                                      \
    const ::xccl::kernels::gpuError_t xccl_gpu_rc_ = (call);                                \
    if (xccl_gpu_rc_ != ::xccl::kernels::gpuSuccess) {                                      \
      XCCL_THROW(::xccl::ErrorKind::kInternal, #call, " failed: ",                          \
                 ::xccl::kernels::gpuGetErrorString(xccl_gpu_rc_));                         \
    }                                                                                       \
  } while (0)
