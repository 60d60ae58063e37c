// CPU emulation of the little of the CUDA/HIP device environment the kernels use, so
// test_gpu_emulated can run the real kernel templates (reduce_kernels.cuh, copy_kernel.cuh,
// barrier.cuh, block_ops.cuh, elements.cuh) with every GPU thread as a std::thread. This folder
// is searched before csrc/, so "kernels/gpu.h" and "kernels/primitives.cuh" resolve here; every
// other kernel header is the real one. Test code only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "gpu/emulation/jitter.h"

#define __global__ inline  // kernels are defined in headers included by several test sources
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define XCCL_GPU_HIP 0

struct uint4 {
  uint32_t x, y, z, w;
};

struct EmulatedDim3 {
  unsigned x = 0, y = 0, z = 0;
};

namespace xccl::emulation {

// __syncthreads for one emulated block: a reusable barrier that also ANDs a predicate.
class BlockSync {
 public:
  explicit BlockSync(int threads) : threads_(threads) {}

  bool arriveAndWait(bool predicate) {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    all_ = all_ && predicate;
    if (++arrived_ == threads_) {
      result_ = all_;
      all_ = true;
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return result_;
    }
    // result_ cannot be overwritten before this thread reads it: the next generation needs it.
    cv_.wait(lock, [&] { return generation_ != generation; });
    return result_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  const int threads_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool all_ = true;
  bool result_ = true;
};

inline thread_local BlockSync* currentBlock = nullptr;

#ifdef XCCL_EMULATED_MUTANTS
// The mutant build (test_gpu_emulated_mutants) skips the flag wait of the skippedSync-th sync()
// of every kernel (0: of all of them; -1: none), chosen at run time by the mutation tests.
inline std::atomic<int> skippedSync{-1};
inline bool skipWait(int syncIndex) {
  const int s = skippedSync.load(std::memory_order_relaxed);
  return s == 0 || s == syncIndex;
}
#define XCCL_BARRIER_SKIP_WAIT(syncIndex) (::xccl::emulation::skipWait(syncIndex))
#endif

}  // namespace xccl::emulation

inline thread_local EmulatedDim3 threadIdx, blockIdx, blockDim, gridDim;

// A thread may reach a block barrier late (it was descheduled, or its loads were slow).
inline void __syncthreads() {
  xccl::emulation::jitter(8, 100);
  xccl::emulation::currentBlock->arriveAndWait(true);
}
inline int __syncthreads_and(int predicate) {
  xccl::emulation::jitter(8, 100);
  return xccl::emulation::currentBlock->arriveAndWait(predicate != 0) ? 1 : 0;
}
