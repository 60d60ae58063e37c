// AMD GPUs and their xGMI links from the KFD topology in sysfs (/sys/class/kfd/kfd/topology),
// readable without root and without any ROCm library. RCCL reads the same files (its
// alt_rsmi.cc); see the ROCm "KFD Topology" docs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topo/sysfs.h"
#include "topo/topology.h"

namespace xccl::topo {

// KFD io_link "type" values (HSA_IOLINKTYPE_*): the KFD numbering, not amdsmi's.
constexpr int kKfdLinkPcie = 2;
constexpr int kKfdLinkXgmi = 11;

struct KfdIoLink {
  int type = 0;
  int nodeTo = -1;
  int weight = 0;
  int64_t minBandwidthMBps = 0;
  int64_t maxBandwidthMBps = 0;
};

struct KfdGpuNode {
  int node = -1;         // KFD node id (CPU nodes come first and are skipped)
  std::string busId;     // from "domain" and "location_id"
  std::string arch;      // "gfx942" from gfx_target_version 90402
  int64_t memoryBytes = 0;
  std::vector<KfdIoLink> links;
};

// GPU nodes (simd_count > 0) in KFD node order; empty when KFD is absent.
std::vector<KfdGpuNode> readKfdGpuNodes(const Sysfs& sysfs);

// "gfx" + major + minor and stepping in hex: 90402 -> gfx942, 90010 -> gfx90a, 110000 -> gfx1100.
std::string gfxArchName(int64_t gfxTargetVersion);

// Adds one kXgmi link per GPU pair joined by KFD xGMI io_links. The link count follows RCCL:
// max_bandwidth / min_bandwidth (an MI250 GCD pair in one package reports 4, MI300X peers 1).
// Nodes map to topology.gpus through pciBusId; links to nodes that are not GPUs are ignored.
void addXgmiLinks(const std::vector<KfdGpuNode>& nodes, Topology& topology);

}  // namespace xccl::topo
