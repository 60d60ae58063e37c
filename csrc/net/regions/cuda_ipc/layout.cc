#include "net/regions/cuda_ipc/layout.h"

#include <cstdint>
#include <limits>

#include "common/error.h"
#include "common/gpu_limits.h"

namespace xccl::net::cuda_ipc {
namespace {

constexpr size_t roundUp(size_t value, size_t unit) { return (value + unit - 1) / unit * unit; }

// Everything after the data buffer, including alignment padding; a bound, not the exact size.
constexpr size_t kFixedBytesBound =
    kGpuFlagAreaBytes + kGpuMaxBlocks * sizeof(uint32_t) + sizeof(uint32_t) + 4 * kPartAlignment;

static_assert(kPartAlignment % kGpuFlagRowBytes == 0, "flag rows need their alignment");

}  // namespace

WorkspaceLayout layoutFor(size_t dataBytes) {
  XCCL_CHECK_ARG(dataBytes <= std::numeric_limits<size_t>::max() - kFixedBytesBound,
                 "cuda_ipc workspace: data buffer of ", dataBytes, " bytes is too large");
  WorkspaceLayout l;
  l.dataBytes = dataBytes;
  l.flagsOffset = roundUp(dataBytes, kPartAlignment);
  l.epochsOffset = roundUp(l.flagsOffset + kGpuFlagAreaBytes, kPartAlignment);
  l.errorOffset = roundUp(l.epochsOffset + kGpuMaxBlocks * sizeof(uint32_t), kPartAlignment);
  l.totalBytes = roundUp(l.errorOffset + sizeof(uint32_t), kPartAlignment);
  return l;
}

}  // namespace xccl::net::cuda_ipc
