// The copying collectives' kernel: all-gather, broadcast and all-to-all are one pull-copy kernel
// (dtype does not matter: bytes). Launched by copy_launch.cu; also compiled for the CPU emulation
// in tests/cpp/gpu. Steps and bytes on the wire: docs/algorithms.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/barrier.cuh"
#include "kernels/block_ops.cuh"
#include "kernels/launch_checks.h"
#include "kernels/partition.h"

namespace xccl::kernels {

// Source j of `sources` is rank `root` when sources == 1 (broadcast), else rank (rank + j) mod W
// (all-gather / all-to-all: rotated so rank r's block b starts on peer r + b, every link busy).
// It is read at buffers[peer] + srcOffset and lands at output + (gather ? peer * chunk : 0).
struct CopyParams {
  DeviceHandle handle;
  void* output;
  size_t chunkBytes;
  size_t srcOffset;  // bytes
  int sources;
  int root;
  int partsPerSource;
  bool gather;
};
static_assert(std::is_trivially_copyable_v<CopyParams>);

__global__ void __launch_bounds__(kThreadsPerBlock) pullCopyKernel(CopyParams p) {
  BlockBarrier barrier(p.handle);
  if (!barrier.begin()) return;
  // Start: every source buffer is complete and visible (release/acquire pairs of the barrier).
  if (!barrier.sync()) return;
  const int rank = p.handle.rank;
  const int world = p.handle.worldSize;
  const int items = p.sources * p.partsPerSource;
  // Item k = (source j, part): consecutive blocks take different sources, so with
  // blocks >= sources all sources are pulled at once.
#pragma unroll 1
  for (int k = blockIdx.x; k < items; k += gridDim.x) {
    const int j = k % p.sources;
    const int part = k / p.sources;
    const int peer = p.sources == 1 ? p.root : (rank + j) % world;
    const Range r = splitEven(p.chunkBytes, p.partsPerSource, part, kVectorBytes);
    const char* src = static_cast<const char*>(p.handle.buffers[peer]) + p.srcOffset + r.begin;
    char* dst = static_cast<char*>(p.output) + (p.gather ? peer * p.chunkBytes : 0) + r.begin;
    if (src != dst) copyRange(src, dst, r.size());  // in place: already there
  }
  // End: no peer still reads this rank's buffer, so the caller may reuse it.
  if (!barrier.sync()) return;
  barrier.end();
}

}  // namespace xccl::kernels
