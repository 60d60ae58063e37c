// The group's mapped error word, in pinned host memory (gpu_path.h). The GPU side checks its
// runtime calls with XCCL_GPU_CHECK (common/gpu_runtime.h), whose xccl::Error the backend turns
// into DistBackendError at its boundary (process_group_ops.cc, gpu_work.cc).
//
// Kernels get its device alias as DeviceHandle::hostWord (kernels/device_handle.h): they mirror
// every failure they record in the workspace's device word into it with system-scope atomics, and
// poll it while they spin. So the host reads the outcome at any time without a copy (every call,
// every wait, after graph replays, which no host code follows) and sets kErrorAborted here so
// spinning kernels return. Host and device updates are not atomic with respect to each other over
// PCIe; that is harmless: each side only ever sets bits, and any non-zero value means "failed".
// Once set the word stays set: the ranks' flags and epochs no longer agree (device_handle.h).
#pragma once

#include <cstdint>
#include <string>

#include "common/gpu_runtime.h"

namespace xccl::backend {

class ErrorWord {
 public:
  explicit ErrorWord(int device);  // zeroed
  ~ErrorWord();
  ErrorWord(const ErrorWord&) = delete;
  ErrorWord& operator=(const ErrorWord&) = delete;

  // What the kernels get as DeviceHandle::error.
  uint32_t* deviceAlias() const { return device_; }
  uint32_t read() const { return __atomic_load_n(host_, __ATOMIC_ACQUIRE); }
  // Makes every kernel spinning with this word return at its next poll.
  void abort() { __atomic_fetch_or(host_, kAbortBit, __ATOMIC_SEQ_CST); }
  // Throws DistBackendError "xccl <op>: the group is unusable: a GPU collective failed: ..."
  // when the word is set.
  void throwIfSet(const char* op) const;

 private:
  static const uint32_t kAbortBit;
  uint32_t* host_ = nullptr;
  uint32_t* device_ = nullptr;
};

}  // namespace xccl::backend
