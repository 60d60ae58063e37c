// Runs real kernel templates on the CPU (see emulation/kernels/gpu.h). Each rank is an emulated
// stream: one host thread that issues its own copy-ins and launches back to back, in its own
// order, never waiting for other ranks between calls (as N GPUs, or N streams of virtual ranks,
// do). A launch runs every (block, thread) of the grid as a std::thread and returns when all of
// them have returned: the kernel boundary that orders a rank's stream. So a fast rank copies in
// its next input while a slow peer still reads its buffer for the previous call, and only the
// kernels' barriers keep them apart. Delays are drawn from emulation/jitter.h.
// Include only from emulated test sources, after the kernel headers.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "gpu/emulation/jitter.h"
#include "kernels/gpu.h"

namespace xccl::emulation {

// Runs kernel(params) with `blocks` x `threads` on the calling stream and returns when the whole
// grid has returned. Every emulated thread gets its own delay seed, drawn from the stream's.
template <typename Params>
void launch(void (*kernel)(Params), const Params& params, int blocks, int threads) {
  const uint64_t launchSeed = jitterState == 0 ? 0 : jitterRandom();
  std::vector<std::unique_ptr<BlockSync>> syncs;
  std::vector<std::thread> workers;
  for (int b = 0; b < blocks; ++b) {
    syncs.push_back(std::make_unique<BlockSync>(threads));
    BlockSync* sync = syncs.back().get();
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([=, &params] {
        threadIdx.x = t;
        blockIdx.x = b;
        blockDim.x = threads;
        gridDim.x = blocks;
        currentBlock = sync;
        if (launchSeed != 0) seedJitter(launchSeed + static_cast<uint64_t>(b * threads + t));
        kernel(params);
      });
    }
  }
  for (auto& w : workers) w.join();
}

// Runs stream(rank) for every rank in `ranks`, each on its own host thread (its emulated
// stream, which may call launch()); returns when all of them have returned. seed 0: no delays.
inline void runStreams(const std::vector<int>& ranks, uint64_t seed,
                       const std::function<void(int rank)>& stream) {
  std::vector<std::thread> streams;
  for (int r : ranks) {
    streams.emplace_back([=, &stream] {
      if (seed != 0) seedJitter(mixSeed(seed) + static_cast<uint64_t>(r));
      stream(r);
    });
  }
  for (auto& s : streams) s.join();
}

}  // namespace xccl::emulation
