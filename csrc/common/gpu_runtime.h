// The CUDA/HIP runtime alias (docs/gpu.md, "ROCm"): every GPU source, kernels and host code alike,
// is written once against these names and builds as CUDA (nvcc, or a C++ compiler with CUDA's
// headers) or as HIP (clang/hipcc -x hip, or a C++ compiler with HIP's headers). Host code
// includes it alone (net/regions/cuda_ipc/workspace.cc, the virtual-rank harness, the GPU tests);
// kernels/gpu.h adds the device headers on top. It lives in common/ because it is not the
// kernels': nothing here needs a kernel, and the host side must not depend on kernels/.
//
// One name per call, XCCL_RT(Malloc) for cudaMalloc/hipMalloc: HIP kept CUDA's names after the
// prefix for nearly everything, so no list of aliases can drift from the code using them. The few
// names that differ (XCCL_RT_NAMED(hipName, cudaName) picks one), and the runtime types the host
// passes around, are spelled gpuXxx below, in namespace xccl (so kernels::, net:: and testing::
// code finds them unqualified).
//
// XCCL_GPU_HIP is decided here, once: clang's HIP mode defines __HIP__ for device code, and HIP's
// host headers need __HIP_PLATFORM_AMD__ (hipcc defines it; CMake's hip::host target gives it to
// the C++ compiler). No other file tests __HIP__, __HIP_PLATFORM_AMD__ or __CUDACC__, except
// kernels/partition.h, which only picks __host__ __device__ markers and must build without either
// runtime's headers.
#pragma once

#include <cstddef>
#include <string>

#include "common/error.h"

#if defined(__HIP__) || defined(__HIP_PLATFORM_AMD__)
#define XCCL_GPU_HIP 1
#include <hip/hip_runtime_api.h>
#define XCCL_RT(name) hip##name
#define XCCL_RT_NAMED(hip, cuda) hip
#else
#define XCCL_GPU_HIP 0
#include <cuda_runtime_api.h>
#define XCCL_RT(name) cuda##name
#define XCCL_RT_NAMED(hip, cuda) cuda
#endif

namespace xccl {

using gpuError_t = XCCL_RT(Error_t);
using gpuStream_t = XCCL_RT(Stream_t);
using gpuEvent_t = XCCL_RT(Event_t);
constexpr gpuError_t gpuSuccess = XCCL_RT(Success);
inline gpuError_t gpuGetLastError() { return XCCL_RT(GetLastError)(); }
inline const char* gpuGetErrorString(gpuError_t e) { return XCCL_RT(GetErrorString)(e); }
inline const char* gpuGetErrorName(gpuError_t e) { return XCCL_RT(GetErrorName)(e); }

// The names that differ beyond the prefix, HIP's first: its device-properties struct has a _t
// and its attributes are spelled in full.
using gpuDeviceProp_t = XCCL_RT_NAMED(hipDeviceProp_t, cudaDeviceProp);
using gpuDeviceAttr_t = XCCL_RT_NAMED(hipDeviceAttribute_t, cudaDeviceAttr);
constexpr gpuDeviceAttr_t gpuDevAttrMultiProcessorCount =
    XCCL_RT_NAMED(hipDeviceAttributeMultiprocessorCount, cudaDevAttrMultiProcessorCount);
constexpr gpuDeviceAttr_t gpuDevAttrMaxThreadsPerMultiProcessor =
    XCCL_RT_NAMED(hipDeviceAttributeMaxThreadsPerMultiProcessor,
                  cudaDevAttrMaxThreadsPerMultiProcessor);
constexpr gpuDeviceAttr_t gpuDevAttrMaxRegistersPerMultiprocessor =
    XCCL_RT_NAMED(hipDeviceAttributeMaxRegistersPerMultiprocessor,
                  cudaDevAttrMaxRegistersPerMultiprocessor);
constexpr gpuDeviceAttr_t gpuDevAttrMaxRegistersPerBlock =
    XCCL_RT_NAMED(hipDeviceAttributeMaxRegistersPerBlock, cudaDevAttrMaxRegistersPerBlock);
// What the runtime returns from calls made while the process exits and it is being torn down
// (nothing to report then: the driver reclaims everything).
constexpr gpuError_t gpuErrorUnloading =
    XCCL_RT_NAMED(hipErrorDeinitialized, cudaErrorCudartUnloading);
// Pinned host memory: hipHostAlloc/hipFreeHost are deprecated in favour of hipHostMalloc/
// hipHostFree, whose flags are spelled hipHostMalloc*.
constexpr unsigned gpuHostAllocDefault = XCCL_RT_NAMED(hipHostMallocDefault, cudaHostAllocDefault);
constexpr unsigned gpuHostAllocMapped = XCCL_RT_NAMED(hipHostMallocMapped, cudaHostAllocMapped);
constexpr unsigned gpuHostAllocPortable =
    XCCL_RT_NAMED(hipHostMallocPortable, cudaHostAllocPortable);
inline gpuError_t gpuHostAlloc(void** p, size_t bytes, unsigned flags) {
  return XCCL_RT_NAMED(hipHostMalloc, cudaHostAlloc)(p, bytes, flags);
}
inline gpuError_t gpuFreeHost(void* p) { return XCCL_RT_NAMED(hipHostFree, cudaFreeHost)(p); }

// Graph external event nodes: an event recorded (gpuEventRecordExternal) or waited on
// (gpuStreamWaitEventExternal) under capture becomes a node that records or waits at every
// replay, instead of an edge inside the graph. CUDA has them since 11.1. HIP has the calls from
// ROCm 6.4.2, which HIP_VERSION cannot tell from 6.4.0 (its patch field is a build number), and
// the external wait node is reported broken on ROCm 7.2.x: taken on HIP 7.0, 7.1 and 7.3 on.
// Without them the callers order captured calls with plain records and waits (docs/gpu.md,
// "CUDA graphs") and these return the runtime's "not supported".
#if !XCCL_GPU_HIP
#define XCCL_GPU_GRAPH_EXTERNAL_EVENTS 1
#elif HIP_VERSION_MAJOR > 7 || (HIP_VERSION_MAJOR == 7 && HIP_VERSION_MINOR != 2)
#define XCCL_GPU_GRAPH_EXTERNAL_EVENTS 1
#else
#define XCCL_GPU_GRAPH_EXTERNAL_EVENTS 0
#endif
constexpr bool kGpuGraphExternalEvents = XCCL_GPU_GRAPH_EXTERNAL_EVENTS;
inline gpuError_t gpuEventRecordExternal(gpuEvent_t event, gpuStream_t stream) {
#if XCCL_GPU_GRAPH_EXTERNAL_EVENTS
  return XCCL_RT(EventRecordWithFlags)(event, stream, XCCL_RT(EventRecordExternal));
#else
  (void)event, (void)stream;
  return XCCL_RT(ErrorNotSupported);
#endif
}
inline gpuError_t gpuStreamWaitEventExternal(gpuStream_t stream, gpuEvent_t event) {
#if XCCL_GPU_GRAPH_EXTERNAL_EVENTS
  return XCCL_RT(StreamWaitEvent)(stream, event, XCCL_RT(EventWaitExternal));
#else
  (void)event, (void)stream;
  return XCCL_RT(ErrorNotSupported);
#endif
}

// The runtime's name and text for an error code, "cudaErrorInvalidValue (invalid argument)".
inline std::string gpuErrorText(gpuError_t rc) {
  return detail::concat(gpuGetErrorName(rc), " (", gpuGetErrorString(rc), ")");
}

namespace detail {

// A checked call's text as written, with XCCL_RT(Name) spelled as the runtime's own name
// (cudaName or hipName), so a message names the call a reader can look up.
inline std::string gpuCallText(const char* written) {
  std::string text = written;
  const std::string alias = "XCCL_RT(";
  for (size_t at = text.find(alias); at != std::string::npos; at = text.find(alias, at)) {
    const size_t close = text.find(')', at);
    if (close == std::string::npos) break;
    const std::string name = text.substr(at + alias.size(), close - at - alias.size());
    text.replace(at, close + 1 - at, (XCCL_GPU_HIP ? "hip" : "cuda") + name);
  }
  return text;
}

}  // namespace detail
}  // namespace xccl

// The one check of a CUDA/HIP runtime call, for every layer: when `call` fails it throws
// xccl::Error(kind) "xccl: <call> failed: <name> (<text>) [file:line]", e.g. "xccl:
// cudaEventRecord(done->get(), stream) failed: cudaErrorInvalidResourceHandle (invalid resource
// handle) [gpu_order.cc:55]". It clears the runtime's last error first: the caller (torch)
// checks cudaGetLastError after its own launches and must not be blamed for ours. Never exits.
// The backend converts the error to torch's exception at its boundary (backend/core/
// torch_error.h), as for every other xccl::Error.
#define XCCL_GPU_CHECK(kind, call)                                 \
  do {                                                             \
    const ::xccl::gpuError_t xccl_gpu_rc_ = (call);                \
    if (xccl_gpu_rc_ != ::xccl::gpuSuccess) {                      \
      (void)::xccl::gpuGetLastError();                             \
      XCCL_THROW((kind), ::xccl::detail::gpuCallText(#call),       \
                 " failed: ", ::xccl::gpuErrorText(xccl_gpu_rc_)); \
    }                                                              \
  } while (0)
