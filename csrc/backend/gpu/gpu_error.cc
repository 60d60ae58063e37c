#include "backend/gpu/gpu_error.h"
#include "backend/gpu/gpu_stream.h"
#include "common/gpu_runtime.h"

#include <c10/util/Exception.h>

#include "backend/core/torch_error.h"
#include "backend/gpu/gpu_rules.h"

namespace xccl::backend {

const uint32_t ErrorWord::kAbortBit = rules::kErrorAborted;

ErrorWord::ErrorWord(int device) {
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  // Portable: the word stays valid whichever device is current when the host reads it.
  void* host = nullptr;
  XCCL_GPU_CHECK(ErrorKind::kSystem,
                 gpuHostAlloc(&host, sizeof(uint32_t), gpuHostAllocMapped | gpuHostAllocPortable));
  host_ = static_cast<uint32_t*>(host);
  __atomic_store_n(host_, 0u, __ATOMIC_RELEASE);
  void* alias = nullptr;
  try {
    XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(HostGetDevicePointer)(&alias, host, 0));
  } catch (const Error&) {
    (void)gpuFreeHost(host);  // the allocation error is the one to report
    throw;
  }
  device_ = static_cast<uint32_t*>(alias);
}

ErrorWord::~ErrorWord() {
  // Only after every kernel that may write it ended or was given up on (GpuPath's destructor).
  if (host_ != nullptr) (void)gpuFreeHost(host_);  // a destructor has no one to tell
}

void ErrorWord::throwIfSet(const char* op) const {
  const uint32_t word = read();
  if (word == 0) return;
  throwTorchError(ErrorKind::kAborted, std::string("xccl ") + op +
                                           ": the group is unusable: a GPU collective failed: " +
                                           rules::describeErrorWord(word));
}

}  // namespace xccl::backend
