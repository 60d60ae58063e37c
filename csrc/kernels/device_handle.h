// What a collective kernel borrows from the host objects that own the memory: a trivially
// copyable DeviceHandle passed by value to every launch.
//
// Plain C++: no CUDA/HIP headers, so the backend can fill a handle in a CPU-compiled TU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/gpu_limits.h"

namespace xccl::kernels {

constexpr int kMaxRanks = kGpuMaxRanks;    // common/gpu_limits.h: shared with net and algo
constexpr int kMaxBlocks = kGpuMaxBlocks;

// One rank's flag area. rows[b].fromPeer[p] is written only by block b of rank p (one writer per
// word, never bytes of a shared word: vLLM PR #2760 traced garbage results to that race) and read
// only by block b of the owning rank. Values grow monotonically (see epochs below), so the area is
// never reset between launches. Rows are padded to 128 bytes so that writers of different blocks
// do not contend for one line.
//
// Allocation requirement (the host side allocates; kernels only borrow):
//  - CUDA: ordinary device memory (cudaMalloc) exported to the peers through CUDA IPC, zeroed once
//    with cudaMemset on every rank before the first launch, and before any peer can write into it.
//  - ROCm: fine-grained / uncached memory, e.g. hipExtMallocWithFlags(..., hipDeviceMallocUncached)
//    or hipDeviceMallocFinegrained. Plain hipMalloc is coarse-grained: a running kernel on the
//    owner may never observe a peer's store (aiter PR #4786).
//    Verify that hipIpcGetMemHandle accepts the chosen flag on the ROCm in use (one downstream
//    project reports it failing on uncached memory).
struct FlagRow {
  alignas(128) uint32_t fromPeer[kMaxRanks];
};
struct FlagArea {
  FlagRow rows[kMaxBlocks];
};

// Error word bits, set with a system-scope atomic OR so the host may map the word (pinned host
// memory) and watch it while a kernel still runs. Zero means healthy. Once non-zero, every later
// kernel using the handle returns at once without touching flags: the flag and epoch state of the
// ranks no longer agree, and the host must treat the communicator as failed (abort, or re-zero
// flags, epochs and error words on all ranks together before reuse).
constexpr uint32_t kErrorTimeout = 1u << 31;  // a flag wait ran past DeviceHandle::timeoutNs
// Set by the host only, in DeviceHandle::hostWord (abort, or shutdown with kernels still running):
// spinning blocks see it at their next poll and return.
constexpr uint32_t kErrorAborted = 1u << 30;
// bits 0..kMaxRanks-1: the peers whose flags never arrived (decoded by describeDeviceError)
constexpr uint32_t kErrorPeerMask = (1u << kMaxRanks) - 1;

constexpr uint64_t kDefaultTimeoutNs = 10ull * 1000 * 1000 * 1000;

// Pointers are as mapped in the launching process: peers' memory through IPC, or, for virtual
// ranks (N ranks as N streams on one GPU, used by tests and benchmarks), plain device pointers.
struct DeviceHandle {
  // Rank p's peer-visible data buffer for this collective; each launcher's Args comment says what
  // it must hold. Entries at and above worldSize are ignored.
  void* buffers[kMaxRanks];
  // Rank p's FlagArea (flags[rank] is this rank's own).
  FlagArea* flags[kMaxRanks];
  // This rank's per-block epoch counters: kMaxBlocks uint32 in ordinary device memory, zeroed once.
  // Block b reads epochs[b] when it starts and writes back the value of its last barrier when it
  // ends, so the counter advances inside the kernel: a CUDA graph that captured the launch stays
  // correct on every replay, with no host-side sequence number baked into the graph. Ranks stay in
  // lockstep because every rank launches the same collectives with the same grid (the grid is a
  // pure function of the Args, which must be identical across ranks, maxBlocks included).
  uint32_t* epochs;
  // This rank's error word (see kErrorTimeout) in its own device memory: every block reads it
  // when it starts (a local read, so a healthy launch pays no PCIe round trip).
  uint32_t* error;
  // Optional (may be null): the device alias of a word in mapped pinned host memory. Kernels OR
  // every failure into it as well, so the host reads the outcome without a copy (after eager
  // calls and graph replays alike), and poll it while they spin (every 256 polls, so its PCIe
  // latency stays off the fast path): a host that sets kErrorAborted there stops spinning blocks.
  uint32_t* hostWord;
  // Bound on any single flag wait; the kernel records kErrorTimeout and returns after it.
  uint64_t timeoutNs;
  int32_t rank;
  int32_t worldSize;
};

static_assert(std::is_trivially_copyable_v<DeviceHandle>, "passed by value to kernels");
static_assert(std::is_standard_layout_v<DeviceHandle>, "same layout in host and device code");
static_assert(sizeof(DeviceHandle) == 2 * kMaxRanks * sizeof(void*) + 4 * 8 + 2 * 4,
              "no padding surprises: the handle is copied into every kernel's parameters");
static_assert(sizeof(FlagRow) == kGpuFlagRowBytes && sizeof(FlagArea) == kGpuFlagAreaBytes,
              "net/regions/cuda_ipc allocates the flag area by common/gpu_limits.h's size");
static_assert(kMaxRanks <= 30, "peer bits, kErrorAborted and kErrorTimeout share the error word");

}  // namespace xccl::kernels
