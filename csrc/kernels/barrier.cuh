// Per-block, per-peer barrier across the ranks of a DeviceHandle (docs/algorithms.md, "Flag
// protocol").
//
// Block b of every rank meets block b of every other rank; blocks never wait for other blocks of
// their own rank. Thread t < worldSize (t != rank) of block b owns the pair with peer t: it stores
// the barrier's value into rank t's word flags[t]->rows[b].fromPeer[rank] (this rank's block b is
// that word's only writer) and waits for rank t's store into its own word
// flags[rank]->rows[b].fromPeer[t].
//
// Values are epochs: block b keeps a counter in handle.epochs[b], adds one per barrier and writes
// it back at the end of the kernel, so consecutive launches (graph replays included) use strictly
// growing values and no flag is ever reset. A waiter accepts any value at or past the one it waits
// for: a fast peer may already have moved on to a later barrier of the same kernel, or to the first
// barrier of the next launch, but it can never run more than one barrier ahead of this block
// (it would need this block's next signal to pass its own next wait). Comparison is on the signed
// difference, so the 32-bit counters may wrap.
#pragma once

#include <cstdint>

#include "kernels/device_handle.h"
#include "kernels/launch_checks.h"
#include "kernels/primitives.cuh"

namespace xccl::kernels {

static_assert(kThreadsPerBlock >= kMaxRanks, "thread t < worldSize owns the pair with peer t");

// Mutation-testing hook: true skips the flag wait of the syncIndex-th sync() (1-based) of a kernel
// while still storing its signal. Only tests/cpp/gpu's mutant build of the CPU emulation defines
// it (to show that the tests fail without that wait); everywhere else it is the constant false and
// the sync counter folds away.
#ifndef XCCL_BARRIER_SKIP_WAIT
#define XCCL_BARRIER_SKIP_WAIT(syncIndex) false
#endif

// Spins until *flag reaches `value`; false after timeoutNs, once this rank's error word is set by
// another block (the flags are then poisoned and there is no point waiting), or once the host set
// the mapped word (abort). Both words are polled only every 256 spins: the host word is a PCIe
// read.
__device__ __forceinline__ bool waitFlagAtLeast(const uint32_t* flag, uint32_t value,
                                                const DeviceHandle& h) {
  uint64_t start = 0;
  for (uint32_t spins = 0;; ++spins) {
    // Relaxed polls, and one acquire once the value is there: the acquire load reads the same
    // word, so (coherence) a value at or past the one polled, written by a release store of the
    // peer made after the store that published its data; it synchronises with that store and
    // orders this rank's later reads of the peer's data. An acquire on every poll would order
    // nothing more, and costs a cache invalidation per poll on ROCm (system scope).
    if (static_cast<int32_t>(ldRelaxedSys(flag) - value) >= 0) {
      (void)ldAcquireSys(flag);
      return true;
    }
    if ((spins & 255u) == 255u) {
      const uint64_t now = globalTimerNs();
      if (start == 0) start = now;
      if (now - start > h.timeoutNs || ldRelaxedSys(h.error) != 0) return false;
      if (h.hostWord != nullptr && ldRelaxedSys(h.hostWord) != 0) return false;
    }
  }
}

class BlockBarrier {
 public:
  __device__ explicit BlockBarrier(const DeviceHandle& h) : h_(h) {}

  // Called by every thread first. False (the block must return) when an earlier failure poisoned
  // the handle. The epoch read needs no ordering: epochs[b] was written by block b of the previous
  // kernel on this stream, and kernel boundaries order it.
  __device__ bool begin() {
    epoch_ = h_.epochs[blockIdx.x];
    const bool healthy = threadIdx.x != 0 || ldRelaxedSys(h_.error) == 0;
    // One thread decides for the block, so no thread returns while others wait at a barrier.
    return __syncthreads_and(healthy);
  }

  // All ranks' block b meet. Everything any thread of this block wrote before the call is visible
  // to every thread of the peers' block b after their call, and vice versa. False after a timeout
  // (recorded in the error word); the block must then return.
  __device__ bool sync() {
    ++epoch_;
    ++syncIndex_;
    // (1) Block-wide barrier: every thread's earlier writes (stage results, or nothing) are ordered
    // before the release store below. bar.sync synchronises the CTA and PTX causality order is
    // transitive, so the release is cumulative over them (same pattern as vLLM barrier_at_end and
    // TensorRT-LLM's two-shot barrier). On ROCm, __syncthreads is a workgroup fence + s_barrier.
    __syncthreads();
    bool arrived = true;
    const int peer = static_cast<int>(threadIdx.x);
    if (peer < h_.worldSize && peer != h_.rank) {
      FlagRow* theirs = &h_.flags[peer]->rows[blockIdx.x];
      const FlagRow* mine = &h_.flags[h_.rank]->rows[blockIdx.x];
      // (2) Release at system scope into the peer's memory: publishes (1) to peer's block b, whose
      // acquire in (3) reads this value. Sole writer of this word: this rank's block b.
      stReleaseSys(&theirs->fromPeer[h_.rank], epoch_);
      // (3) Acquire at system scope on this rank's own word, written only by peer's block b in
      // its (2): everything peer's block b wrote before its (1) is visible to this thread now.
      if (!XCCL_BARRIER_SKIP_WAIT(syncIndex_)) {
        arrived = waitFlagAtLeast(&mine->fromPeer[peer], epoch_, h_);
      }
      if (!arrived) recordFailure(kErrorTimeout | (1u << peer));
    }
    // (4) Block-wide barrier after the acquires: the other threads' later reads of peer data are
    // ordered after (3) (causality through bar.sync again). Also agrees on failure block-wide.
    return __syncthreads_and(arrived);
  }

  // Called by every thread after the last sync(). Thread 0 persists the epoch for the next
  // launch; the other threads read epochs[b] in begin(), before sync()'s block barriers, so the
  // write cannot race with them.
  __device__ void end() {
    if (threadIdx.x == 0) h_.epochs[blockIdx.x] = epoch_;
  }

 private:
  // Into the device word (later launches stop at begin()) and the host's mirror (read without a
  // copy). Relaxed: a set bit orders nothing, it only makes everyone give up.
  __device__ void recordFailure(uint32_t bits) {
    atomicOrSys(h_.error, bits);
    if (h_.hostWord != nullptr) atomicOrSys(h_.hostWord, bits);
  }

  const DeviceHandle& h_;
  uint32_t epoch_ = 0;
  int syncIndex_ = 0;  // sync() calls so far in this kernel; read only by the mutation hook
};

}  // namespace xccl::kernels
