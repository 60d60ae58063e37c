#include "topo/links.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "common/error.h"
#include "topo/pci.h"

namespace xccl::topo {
namespace {

std::vector<int> resolveGpus(const Topology& topology, const std::vector<int>& gpus) {
  const int count = static_cast<int>(topology.gpus.size());
  if (gpus.empty()) {
    std::vector<int> all(static_cast<size_t>(count));
    std::iota(all.begin(), all.end(), 0);
    return all;
  }
  for (int gpu : gpus) {
    XCCL_CHECK_ARG(gpu >= 0 && gpu < count, "GPU ", gpu, " is not one of the ", count, " GPUs");
  }
  return gpus;
}

// Calls fn(link-or-nullptr) for every unordered pair of distinct GPUs in the set.
template <typename Fn>
void forEachPair(const Topology& topology, const std::vector<int>& gpus, Fn fn) {
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = i + 1; j < gpus.size(); ++j) {
      if (gpus[i] != gpus[j]) fn(findGpuLink(topology, gpus[i], gpus[j]));
    }
  }
}

}  // namespace

const char* linkClassName(LinkClass linkClass) {
  switch (linkClass) {
    case LinkClass::kNone: return "none";
    case LinkClass::kPcie: return "pcie";
    case LinkClass::kNvlinkPartial: return "nvlink_partial";
    case LinkClass::kNvswitch: return "nvswitch";
    case LinkClass::kXgmiPartial: return "xgmi_partial";
    case LinkClass::kXgmiFullMesh: return "xgmi_full_mesh";
  }
  return "?";
}

const GpuLink* findGpuLink(const Topology& topology, int gpuA, int gpuB) {
  int a = std::min(gpuA, gpuB);
  int b = std::max(gpuA, gpuB);
  for (const GpuLink& link : topology.gpuLinks) {
    if (link.gpuA == a && link.gpuB == b) return &link;
  }
  return nullptr;
}

LinkClass gpuLinkClass(const Topology& topology, const std::vector<int>& gpus) {
  std::vector<int> set = resolveGpus(topology, gpus);
  int pairs = 0;
  int nvswitch = 0;
  int nvlink = 0;
  int xgmi = 0;
  forEachPair(topology, set, [&](const GpuLink* link) {
    ++pairs;
    if (link == nullptr) return;
    nvswitch += link->type == LinkType::kNvswitch;
    nvlink += link->type == LinkType::kNvlink;
    xgmi += link->type == LinkType::kXgmi;
  });
  if (pairs == 0) return LinkClass::kNone;
  if (nvswitch == pairs) return LinkClass::kNvswitch;
  if (xgmi == pairs) return LinkClass::kXgmiFullMesh;
  if (nvswitch + nvlink > 0) return LinkClass::kNvlinkPartial;
  if (xgmi > 0) return LinkClass::kXgmiPartial;
  return LinkClass::kPcie;
}

bool isFullXgmiMesh(const Topology& topology, const std::vector<int>& gpus) {
  return gpuLinkClass(topology, gpus) == LinkClass::kXgmiFullMesh;
}

bool isNvswitchFabric(const Topology& topology, const std::vector<int>& gpus) {
  return gpuLinkClass(topology, gpus) == LinkClass::kNvswitch;
}

double minPairBandwidthGBps(const Topology& topology, const std::vector<int>& gpus) {
  std::vector<int> set = resolveGpus(topology, gpus);
  double lowest = std::numeric_limits<double>::infinity();
  forEachPair(topology, set, [&](const GpuLink* link) {
    lowest = std::min(lowest, link ? link->bandwidthGBps : 0.0);
  });
  return lowest == std::numeric_limits<double>::infinity() ? 0.0 : lowest;
}

PciPath gpuNicPath(const Topology& topology, int gpu, int nic) {
  XCCL_CHECK_ARG(gpu >= 0 && gpu < static_cast<int>(topology.gpus.size()), "no GPU ", gpu);
  XCCL_CHECK_ARG(nic >= 0 && nic < static_cast<int>(topology.nics.size()), "no NIC ", nic);
  const Gpu& g = topology.gpus[static_cast<size_t>(gpu)];
  const Nic& n = topology.nics[static_cast<size_t>(nic)];
  return pciPathBetween(g.pciPath, g.numaNode, n.pciPath, n.numaNode);
}

std::vector<int> nearestNics(const Topology& topology, int gpu) {
  std::vector<int> usable;
  for (size_t i = 0; i < topology.nics.size(); ++i) {
    if (topology.nics[i].up && !topology.nics[i].isVirtual) usable.push_back(static_cast<int>(i));
  }
  if (usable.empty()) return usable;
  // PciPath is ordered best first; kUnknown sorts last.
  auto rank = [&](int nic) { return static_cast<int>(gpuNicPath(topology, gpu, nic)); };
  int best = rank(*std::min_element(usable.begin(), usable.end(),
                                    [&](int a, int b) { return rank(a) < rank(b); }));
  std::vector<int> closest;
  for (int nic : usable) {
    if (rank(nic) == best) closest.push_back(nic);
  }
  // -1 (unknown, as virtio reports) is a speed too: closest NICs that all report none are kept.
  int64_t fastest = -1;
  for (int nic : closest) {
    fastest = std::max(fastest, topology.nics[static_cast<size_t>(nic)].speedMbps);
  }
  std::vector<int> result;
  for (int nic : closest) {
    if (topology.nics[static_cast<size_t>(nic)].speedMbps == fastest) result.push_back(nic);
  }
  return result;
}

}  // namespace xccl::topo
