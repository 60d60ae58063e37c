// Pure questions about how GPUs and NICs are connected, asked by the algorithm selector.
//
// The selector keys its choices on these answers (docs/topology.md): all-pairs exchanges on
// a full xGMI mesh (every peer link driven at once), NVSwitch delegation at large sizes, one-shot
// thresholds by link class. Each function takes an optional GPU subset because a communicator
// may span only some GPUs of the machine: 4 GPUs of an MI300X box are still fully meshed.
#pragma once

#include <vector>

#include "topo/topology.h"

namespace xccl::topo {

enum class LinkClass {
  kNone,           // fewer than two GPUs
  kPcie,           // no GPU interconnect between any pair
  kNvlinkPartial,  // some NVLink, but not every pair through an NVSwitch fabric
  kNvswitch,       // every pair through NVSwitch: uniform full bandwidth (HGX/DGX)
  kXgmiPartial,    // some xGMI, not every pair directly (MI250: 1, 2 or 4 links, some none)
  kXgmiFullMesh,   // every pair has direct xGMI (MI300X: 7 peers)
};

const char* linkClassName(LinkClass linkClass);

// The link between two GPUs (in either order); nullptr when none is listed.
const GpuLink* findGpuLink(const Topology& topology, int gpuA, int gpuB);

// The class of the links among `gpus` (indices; empty means every GPU of the machine).
// Throws kInvalidArgument for an index that is not a GPU.
LinkClass gpuLinkClass(const Topology& topology, const std::vector<int>& gpus = {});

bool isFullXgmiMesh(const Topology& topology, const std::vector<int>& gpus = {});
bool isNvswitchFabric(const Topology& topology, const std::vector<int>& gpus = {});

// The smallest and largest per-direction bandwidth between any two of `gpus` (GB/s; 0 when
// unknown). A ring or all-pairs schedule runs at the pace of the slowest pair.
double minPairBandwidthGBps(const Topology& topology, const std::vector<int>& gpus = {});

// The PCIe path between a GPU and a NIC (PIX best ... SYS worst).
PciPath gpuNicPath(const Topology& topology, int gpu, int nic);

// The usable NICs (up, not virtual) closest to `gpu`: the best PCIe path class, then the
// fastest, in topology order. Empty when no NIC is usable.
std::vector<int> nearestNics(const Topology& topology, int gpu);

}  // namespace xccl::topo
