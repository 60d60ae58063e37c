// Runs real kernel templates on the CPU (see emulation/kernels/gpu.h): every (rank, block, thread)
// of a launch is a std::thread, all ranks' launches run at once as with virtual ranks on a GPU.
// Include only from test_emulated_kernels.cc, after the kernel headers.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/gpu.h"

namespace xccl::emulation {

// Launches kernel(params[r]) with `blocks` x `threads` on every rank r listed in `ranks`
// (all ranks when empty) and returns when all of them have returned.
template <typename Params>
void runGrid(void (*kernel)(Params), const std::vector<Params>& params, int blocks, int threads,
             std::vector<int> ranks = {}) {
  if (ranks.empty()) {
    for (int r = 0; r < static_cast<int>(params.size()); ++r) ranks.push_back(r);
  }
  std::vector<std::unique_ptr<BlockSync>> syncs;
  std::vector<std::thread> workers;
  for (int r : ranks) {
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
          kernel(params[r]);
        });
      }
    }
  }
  for (auto& w : workers) w.join();
}

}  // namespace xccl::emulation
