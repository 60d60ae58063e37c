// torch's GPU stream and device-guard names for the backend's GPU files (gpu_path.cc, gpu_work.*),
// one spelling for a CUDA and a ROCm torch. The runtime API itself (events, copies, stream waits)
// comes from common/gpu_runtime.h (XCCL_RT(EventRecord), gpuStream_t, ...); this header adds only
// what torch owns: its stream pool, its current stream and its device guard.
//
// Why three branches. torch's CMake build does not compile ROCm from CUDA sources directly: it
// "hipifies" them first (torch/utils/hipify), and the installed headers of a ROCm torch are that
// output, so a source built against them must use the names hipify produced. xccl's CMake build
// compiles its sources as they are (no hipify step), so it spells those names itself:
//  - CUDA torch: c10/cuda/CUDAStream.h and CUDAGuard.h, c10::cuda::CUDAStream and CUDAGuard.
//  - ROCm torch, hipify v1 (torch.utils.hipify.__version__ 1.x): c10::cuda became c10::hip and
//    CUDAStream became HIPStream, whose device type is HIP. Tensors of a ROCm torch are still
//    device type CUDA, so the backend needs the wrappers that report CUDA, "Note [Masquerading as
//    CUDA]" in ATen/hip/impl/HIPGuardImplMasqueradingAsCUDA.h: c10::hip::
//    HIPStreamMasqueradingAsCUDA, getStreamFromPoolMasqueradingAsCUDA,
//    getCurrentHIPStreamMasqueradingAsCUDA (ATen/hip/impl/HIPStreamMasqueradingAsCUDA.h) and
//    HIPGuardMasqueradingAsCUDA. These are what torch's own hipify maps c10::cuda::CUDAStream,
//    getStreamFromPool, getCurrentCUDAStream and CUDAGuard to in extension sources.
//  - ROCm torch, hipify v2 (__version__ 2.x; pytorch/pytorch#151845, relanded as #174087;
//    ROCm/hipify_torch#76): classes and namespaces are no longer renamed, only header paths. The
//    c10::cuda names live in c10/hip/HIPStream.h and c10/hip/HIPGuard.h, and the masquerading
//    wrappers are thin aliases of them or absent, so the plain c10::cuda names are the ones to use
//    (as FBGEMM and flash-attention do under their HIPIFY_V2 define).
// setup.py reads torch.utils.hipify.__version__ and CMake passes XCCL_TORCH_HIPIFY_V2 (0 or 1);
// torch's cpp_extension makes the same test for its -DHIPIFY_V2.
//
// No ROCm torch is installable where CI runs (not on PyPI): scripts/check_hip.sh compiles the
// hipify v2 branch against torch's CUDA headers hipified as a ROCm build ships them; the hipify
// v1 branch has never been compiled.
#pragma once

#include <c10/core/Device.h>

// First: it decides XCCL_GPU_HIP, which picks the branch below.
#include "common/gpu_runtime.h"

#if XCCL_GPU_HIP && !XCCL_TORCH_HIPIFY_V2
#include <ATen/hip/impl/HIPGuardImplMasqueradingAsCUDA.h>
#include <ATen/hip/impl/HIPStreamMasqueradingAsCUDA.h>
#elif XCCL_GPU_HIP
#include <c10/hip/HIPGuard.h>
#include <c10/hip/HIPStream.h>
#else
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace xccl::backend {

// A torch stream of device type CUDA (on ROCm too: what tensors and c10::Stream consumers
// expect): .stream() is the runtime handle (gpuStream_t), .unwrap() the c10::Stream. Device -1
// means the current device, as in torch. GpuDeviceGuard makes a device current for a scope and
// restores the previous one.
// XCCL_TORCH_GPU(hipName, cudaName): the HIP name where torch's HIP build (before hipify v2)
// keeps c10::hip spellings, else the CUDA one.
#if XCCL_GPU_HIP && !XCCL_TORCH_HIPIFY_V2
#define XCCL_TORCH_GPU(hip, cuda) hip
#else
#define XCCL_TORCH_GPU(hip, cuda) cuda
#endif
using GpuStream = XCCL_TORCH_GPU(c10::hip::HIPStreamMasqueradingAsCUDA, c10::cuda::CUDAStream);
using GpuDeviceGuard = XCCL_TORCH_GPU(c10::hip::HIPGuardMasqueradingAsCUDA, c10::cuda::CUDAGuard);
inline GpuStream gpuStreamFromPool(bool highPriority, c10::DeviceIndex device) {
  return XCCL_TORCH_GPU(c10::hip::getStreamFromPoolMasqueradingAsCUDA,
                        c10::cuda::getStreamFromPool)(highPriority, device);
}
// A stream xccl created itself (XCCL_RT(StreamCreateWithFlags)), as torch's stream type.
inline GpuStream gpuStreamFromExternal(gpuStream_t stream, c10::DeviceIndex device) {
  return XCCL_TORCH_GPU(c10::hip::getStreamFromExternalMasqueradingAsCUDA,
                        c10::cuda::getStreamFromExternal)(stream, device);
}
inline GpuStream currentGpuStream(c10::DeviceIndex device) {
  return XCCL_TORCH_GPU(c10::hip::getCurrentHIPStreamMasqueradingAsCUDA,
                        c10::cuda::getCurrentCUDAStream)(device);
}
#undef XCCL_TORCH_GPU

// Whether `device`'s current stream (-1: the current device's) is capturing a graph. Asked of the
// runtime rather than of torch's c10::cuda::currentStreamCaptureStatusMayInitCtx, whose header and
// namespace change with the hipify version like the names above; the answer is the same (torch asks
// cudaStreamIsCapturing of the current stream too).
inline bool currentStreamCapturing(c10::DeviceIndex device = -1) {
  XCCL_RT(StreamCaptureStatus) status = XCCL_RT(StreamCaptureStatusNone);
  XCCL_GPU_CHECK(ErrorKind::kInternal,
                 XCCL_RT(StreamIsCapturing)(currentGpuStream(device).stream(), &status));
  return status != XCCL_RT(StreamCaptureStatusNone);
}

}  // namespace xccl::backend
