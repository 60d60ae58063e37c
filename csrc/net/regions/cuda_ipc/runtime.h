// Host-side CUDA/HIP helpers of the workspace (workspace.cc): a destructor's check, a scoped
// current device and the allocation. Internal to net/regions/cuda_ipc; needs the runtime headers,
// so it is included only by sources built when XCCL_WITH_CUDA is 1.
#pragma once

#include <string>

#include "common/error.h"
#include "common/gpu_runtime.h"
#include "common/logging.h"

namespace xccl::net::cuda_ipc {

// For destructors: logs instead of throwing. At process exit the runtime may already be unloading;
// the driver then reclaims everything and there is nothing to report.
inline void warnIfFailed(gpuError_t rc, const char* what) {
  if (rc == gpuSuccess) return;
  (void)gpuGetLastError();
  if (rc != gpuErrorUnloading) XCCL_WARN("cuda_ipc", what, " failed: ", gpuErrorText(rc));
}

// Makes `device` current for a scope and restores the caller's device after it: the backend shares
// its host threads with torch, whose current device must not change under it. Only switches when
// the device differs, because cudaSetDevice creates a device's primary context (memory on that GPU)
// and a caller already on `device` should pay nothing.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    status_ = XCCL_RT(GetDevice)(&previous_);
    if (status_ == gpuSuccess && previous_ != device) {
      status_ = XCCL_RT(SetDevice)(device);
      restore_ = status_ == gpuSuccess;
    }
  }
  ~ScopedDevice() {
    if (restore_) warnIfFailed(XCCL_RT(SetDevice)(previous_), "restoring the current device");
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  gpuError_t status() const { return status_; }

 private:
  int previous_ = 0;
  bool restore_ = false;
  gpuError_t status_ = gpuSuccess;
};

// A non-blocking stream private to one setup step: its work does not wait for the caller's.
class ScopedStream {
 public:
  ScopedStream() {
    XCCL_GPU_CHECK(ErrorKind::kInternal,
                   XCCL_RT(StreamCreateWithFlags)(&stream_, XCCL_RT(StreamNonBlocking)));
  }
  ~ScopedStream() { warnIfFailed(XCCL_RT(StreamDestroy)(stream_), "destroying a setup stream"); }
  ScopedStream(const ScopedStream&) = delete;
  ScopedStream& operator=(const ScopedStream&) = delete;
  gpuStream_t get() const { return stream_; }

 private:
  gpuStream_t stream_ = nullptr;
};

// Where the workspace's parts live (layout.h). CUDA: one plain device allocation of the whole
// layout (peers' flag stores reach a running kernel through NVLink/PCIe coherence). ROCm: plain
// hipMalloc memory is coarse-grained, and a peer's store may stay invisible to a kernel polling
// it, so the flag area (flags, epochs, error word: [flagsOffset, totalBytes)) is an allocation of
// its own, uncached (hipExtMallocWithFlags(hipDeviceMallocUncached), as aiter allocates its
// signals), or fine-grained with HIP headers older than that flag (ROCm 5.2). The data stays
// plain, cached memory: it is never polled, and the system-scope release/acquire of the flags
// around every access to a peer's data writes back and invalidates the caches it needs
// (kernels/primitives.cuh; docs/algorithms.md, "ROCm"). Not run on AMD hardware yet.
constexpr bool kFlagAreaApart = XCCL_GPU_HIP;
inline gpuError_t allocateData(void** base, size_t bytes) { return XCCL_RT(Malloc)(base, bytes); }
inline gpuError_t allocateFlagArea(void** base, size_t bytes) {
#if XCCL_GPU_HIP
#ifdef hipDeviceMallocUncached
  return hipExtMallocWithFlags(base, bytes, hipDeviceMallocUncached);
#else
  return hipExtMallocWithFlags(base, bytes, hipDeviceMallocFinegrained);
#endif
#else
  return XCCL_RT(Malloc)(base, bytes);
#endif
}

}  // namespace xccl::net::cuda_ipc
