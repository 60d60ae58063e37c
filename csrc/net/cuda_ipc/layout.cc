#include "net/cuda_ipc/layout.h"

#include <cstdint>
#include <limits>

#include "common/error.h"
#include "kernels/device_handle.h"

namespace xccl::net::cuda_ipc {
namespace {

constexpr size_t roundUp(size_t value, size_t unit) { return (value + unit - 1) / unit * unit; }

// Everything after the data buffer, including alignment padding; a bound, not the exact size.
constexpr size_t kFixedBytesBound = sizeof(kernels::FlagArea) +
                                    kernels::kMaxBlocks * sizeof(uint32_t) + sizeof(uint32_t) +
                                    4 * kPartAlignment;

static_assert(kPartAlignment % alignof(kernels::FlagArea) == 0, "flag rows need their alignment");

}  // namespace

WorkspaceLayout layoutFor(size_t dataBytes) {
  XCCL_CHECK_ARG(dataBytes <= std::numeric_limits<size_t>::max() - kFixedBytesBound,
                 "cuda_ipc workspace: data buffer of ", dataBytes, " bytes is too large");
  WorkspaceLayout l;
  l.dataBytes = dataBytes;
  l.flagsOffset = roundUp(dataBytes, kPartAlignment);
  l.epochsOffset = roundUp(l.flagsOffset + sizeof(kernels::FlagArea), kPartAlignment);
  l.errorOffset = roundUp(l.epochsOffset + kernels::kMaxBlocks * sizeof(uint32_t), kPartAlignment);
  l.totalBytes = roundUp(l.errorOffset + sizeof(uint32_t), kPartAlignment);
  return l;
}

}  // namespace xccl::net::cuda_ipc
