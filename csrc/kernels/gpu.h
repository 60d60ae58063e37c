// The one CUDA/HIP alias header (DESIGN.md section 5): kernel sources are written once against
// these names and compile with nvcc or with hipcc -x hip. Only device code includes it.
//
// XCCL_GPU_HIP is decided here, once, from the compiler (clang's HIP mode defines __HIP__); no
// other file tests __HIP__ or __CUDACC__ (partition.h only picks __host__ __device__ markers).
#pragma once

#include "common/error.h"

#if defined(__HIP__)
#define XCCL_GPU_HIP 1
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
#define XCCL_GPU_HIP 0
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

namespace xccl::kernels {

#if XCCL_GPU_HIP
using gpuError_t = hipError_t;
using gpuStream_t = hipStream_t;
constexpr gpuError_t gpuSuccess = hipSuccess;
inline gpuError_t gpuGetLastError() { return hipGetLastError(); }
inline const char* gpuGetErrorString(gpuError_t e) { return hipGetErrorString(e); }
#else
using gpuError_t = cudaError_t;
using gpuStream_t = cudaStream_t;
constexpr gpuError_t gpuSuccess = cudaSuccess;
inline gpuError_t gpuGetLastError() { return cudaGetLastError(); }
inline const char* gpuGetErrorString(gpuError_t e) { return cudaGetErrorString(e); }
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
