// The fabric among a set of GPUs (gpu_plan.h): which pairs can load from each other, and over
// what links.
#include <algorithm>

#include "algo/gpu_plan.h"
#include "common/error.h"
#include "topo/links.h"

namespace xccl::algo {
namespace {

// Whether two GPUs can load from each other's memory: over NVLink, NVSwitch or xGMI, or over PCIe
// below a common switch. Paths through a host bridge or between sockets are assumed not to carry
// P2P: NCCL itself allows them only up to PXB on Intel and ARM CPUs (src/graph/paths.cc,
// ncclTopoCheckP2p), and pull kernels like ours were reported never to complete over such PCIe
// P2P (1Cat-vLLM issue #652). The topology cannot tell whether the driver enables P2P at all.
bool peerAccess(const topo::GpuLink* link) {
  if (link == nullptr) return false;
  if (link->type != topo::LinkType::kPcie) return true;
  return link->pciPath == topo::PciPath::kPix || link->pciPath == topo::PciPath::kPxb;
}

}  // namespace

GpuFabric classifyFabric(const topo::Topology& topology, const std::vector<int>& gpus) {
  std::vector<int> set(gpus);
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  const int count = static_cast<int>(topology.gpus.size());
  for (int gpu : set) {
    XCCL_CHECK_ARG(gpu >= 0 && gpu < count, "GPU ", gpu, " is not one of the ", count, " GPUs");
  }
  if (set.size() <= 1) return GpuFabric::kSingleGpu;
  bool allNvlink = true;  // every pair a direct NVLink or through NVSwitch
  for (size_t i = 0; i < set.size(); ++i) {
    for (size_t j = i + 1; j < set.size(); ++j) {
      const topo::GpuLink* link = topo::findGpuLink(topology, set[i], set[j]);
      if (!peerAccess(link)) return GpuFabric::kNoPeerAccess;
      allNvlink = allNvlink && (link->type == topo::LinkType::kNvlink ||
                                link->type == topo::LinkType::kNvswitch);
    }
  }
  switch (topo::gpuLinkClass(topology, set)) {
    case topo::LinkClass::kNone: return GpuFabric::kSingleGpu;
    case topo::LinkClass::kNvswitch: return GpuFabric::kNvswitch;
    case topo::LinkClass::kXgmiFullMesh: return GpuFabric::kXgmiMesh;
    case topo::LinkClass::kPcie: return GpuFabric::kPcieSwitch;
    case topo::LinkClass::kNvlinkPartial:
      return allNvlink ? GpuFabric::kNvlinkMesh : GpuFabric::kMixed;
    case topo::LinkClass::kXgmiPartial: return GpuFabric::kMixed;
  }
  return GpuFabric::kUnknown;
}

const char* gpuFabricName(GpuFabric fabric) {
  switch (fabric) {
    case GpuFabric::kSingleGpu: return "single_gpu";
    case GpuFabric::kNvswitch: return "nvswitch";
    case GpuFabric::kNvlinkMesh: return "nvlink_mesh";
    case GpuFabric::kXgmiMesh: return "xgmi_mesh";
    case GpuFabric::kMixed: return "mixed";
    case GpuFabric::kPcieSwitch: return "pcie_switch";
    case GpuFabric::kNoPeerAccess: return "no_peer_access";
    case GpuFabric::kUnknown: return "unknown";
  }
  return "?";
}

const char* gpuCollectiveName(GpuCollective collective) { return vocab::name(collective); }
const char* gpuKernelName(GpuKernel kernel) { return vocab::name(kernel); }
const char* gpuRouteName(GpuRoute route) { return vocab::name(route); }

}  // namespace xccl::algo
