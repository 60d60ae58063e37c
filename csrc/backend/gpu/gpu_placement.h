// Where a group's ranks and GPUs are: exchanged once through the store when the GPU side is
// created, so every rank plans from the same facts (gpu_path.h).
#pragma once

#include <chrono>
#include <vector>

#include "net/rendezvous/group_layout.h"
#include "net/rendezvous/store.h"

namespace xccl::backend {

struct Placement {
  int hosts = 1;
  int ranksPerGpu = 1;    // the most ranks on any one GPU of the group
  std::vector<int> gpus;  // topology indices of this host's ranks' GPUs (empty: not listed)
  bool sameHost = true;   // every rank on this host
  // The smallest SM count of the group's GPUs and the fewest kernel blocks one of their SMs is
  // sure to hold (algo::residentBlocksPerSm): the minimum over all ranks, so the grid cap for
  // ranks that share a GPU (algo::sharedGpuMaxBlocks) is the same on every rank.
  int smCount = 0;
  int blocksPerSm = 1;
};

// Collective over the store (every rank of `layout`'s group): each rank's GPU facts; where the
// ranks are comes from the group's layout (net/rendezvous/group_layout.h).
Placement exchangePlacement(net::Store& store, const net::GroupLayout& layout, int device,
                            std::chrono::milliseconds timeout);

}  // namespace xccl::backend
