// The byte layout of one rank's symmetric CUDA IPC workspace (workspace.h). Every rank of a group
// allocates the same layout, so an offset means the same part in every rank's allocation.
//
//   [0, dataBytes)                  data: the peer-visible buffer collective inputs are copied into
//   [flagsOffset, + FlagArea)       this rank's kernels::FlagArea (written by peers)
//   [epochsOffset, + kMaxBlocks*4)  this rank's per-block epoch counters (own kernels only)
//   [errorOffset, + 4)              this rank's error word (own kernels only)
//
// Every part starts on a 256-byte boundary (cudaMalloc's minimum alignment, and a multiple of the
// 128 bytes a FlagRow needs), so an allocation's base alignment carries over to each part. Flags,
// epochs and the error word are contiguous from flagsOffset to totalBytes and are zeroed together;
// on ROCm that flag area is an allocation of its own at the same relative offsets (runtime.h).
//
// Plain C++: no CUDA headers, unit-tested on CPU.
#pragma once

#include <cstddef>

namespace xccl::net::cuda_ipc {

constexpr size_t kPartAlignment = 256;

struct WorkspaceLayout {
  size_t dataBytes;  // per-rank peer-visible data buffer (collective inputs are copied in)
  size_t flagsOffset, epochsOffset, errorOffset, totalBytes;
};

// Pure. Throws kInvalidArgument when dataBytes is too large to lay out (the offsets would wrap).
WorkspaceLayout layoutFor(size_t dataBytes);

}  // namespace xccl::net::cuda_ipc
