#include "topo/gpu_probe.h"

#include <algorithm>
#include <map>

#include "topo/amdsmi.h"
#include "topo/cpu_probe.h"
#include "topo/kfd.h"

namespace xccl::topo {
namespace {

Gpu gpuFromPci(const PciDevice& device, GpuVendor vendor) {
  Gpu gpu;
  gpu.vendor = vendor;
  gpu.pciBusId = device.busId;
  gpu.pciPath = device.path;
  gpu.numaNode = device.numaNode;
  gpu.cpus = device.cpus;
  gpu.name = gpuNameFromPciId(device.vendor, device.device);
  return gpu;
}

Gpu* findGpu(Topology& topology, const std::string& busId) {
  for (Gpu& gpu : topology.gpus) {
    if (gpu.pciBusId == busId) return &gpu;
  }
  return nullptr;
}

bool hasLink(const Topology& topology, int a, int b) {
  return std::any_of(topology.gpuLinks.begin(), topology.gpuLinks.end(),
                     [&](const GpuLink& l) { return l.gpuA == a && l.gpuB == b; });
}

}  // namespace

std::string gpuNameFromPciId(uint32_t vendor, uint32_t device) {
  // From the PCI ID repository (pci-ids.ucw.cz); only parts xccl's fixtures and docs name.
  static const std::map<std::pair<uint32_t, uint32_t>, const char*> kNames = {
      {{kVendorNvidia, 0x20b2}, "NVIDIA A100-SXM4-80GB"},
      {{kVendorNvidia, 0x2330}, "NVIDIA H100 80GB HBM3"},
      {{kVendorNvidia, 0x2331}, "NVIDIA H100 PCIe"},
      {{kVendorNvidia, 0x2335}, "NVIDIA H200"},
      {{kVendorAmd, 0x740c}, "AMD Instinct MI250X/MI250"},
      {{kVendorAmd, 0x740f}, "AMD Instinct MI210"},
      {{kVendorAmd, 0x74a1}, "AMD Instinct MI300X"},
  };
  auto it = kNames.find({vendor, device});
  return it == kNames.end() ? "" : it->second;
}

void addNvlinkLinks(const std::vector<NvmlGpuInfo>& nvml, Topology& topology) {
  std::map<std::string, int> indexOf;
  for (const Gpu& gpu : topology.gpus) indexOf[gpu.pciBusId] = gpu.index;
  const size_t n = topology.gpus.size();
  std::vector<std::vector<int>> direct(n, std::vector<int>(n, 0));
  for (const NvmlGpuInfo& info : nvml) {
    auto self = indexOf.find(info.busId);
    if (self == indexOf.end()) continue;
    Gpu& gpu = topology.gpus[static_cast<size_t>(self->second)];
    gpu.nvswitchLinks = 0;
    for (const NvlinkEndpoint& link : info.links) {
      auto peer = indexOf.find(link.remoteBusId);
      if (link.toSwitch || peer == indexOf.end()) {
        ++gpu.nvswitchLinks;
      } else if (peer->second != self->second) {
        ++direct[static_cast<size_t>(self->second)][static_cast<size_t>(peer->second)];
      }
    }
  }
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      const Gpu& ga = topology.gpus[a];
      const Gpu& gb = topology.gpus[b];
      double perLink = nvlinkGBpsPerLink(ga.arch.empty() ? gb.arch : ga.arch);
      GpuLink link;
      link.gpuA = static_cast<int>(a);
      link.gpuB = static_cast<int>(b);
      // Each side counts the links it sees; a link that is up on one end only is not usable.
      int count = std::min(direct[a][b], direct[b][a]);
      if (count > 0) {
        link.type = LinkType::kNvlink;
        link.count = count;
      } else if (ga.nvswitchLinks > 0 && gb.nvswitchLinks > 0) {
        link.type = LinkType::kNvswitch;
        link.count = std::min(ga.nvswitchLinks, gb.nvswitchLinks);
      } else {
        continue;
      }
      link.bandwidthGBps = link.count * perLink;
      topology.gpuLinks.push_back(link);
    }
  }
}

void addPcieLinks(Topology& topology) {
  const int n = static_cast<int>(topology.gpus.size());
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      if (hasLink(topology, a, b)) continue;
      GpuLink link;
      link.gpuA = a;
      link.gpuB = b;
      link.type = LinkType::kPcie;
      topology.gpuLinks.push_back(link);
    }
  }
  for (GpuLink& link : topology.gpuLinks) {
    const Gpu& a = topology.gpus[static_cast<size_t>(link.gpuA)];
    const Gpu& b = topology.gpus[static_cast<size_t>(link.gpuB)];
    link.pciPath = pciPathBetween(a.pciPath, a.numaNode, b.pciPath, b.numaNode);
  }
  std::sort(topology.gpuLinks.begin(), topology.gpuLinks.end(),
            [](const GpuLink& x, const GpuLink& y) {
              return std::make_pair(x.gpuA, x.gpuB) < std::make_pair(y.gpuA, y.gpuB);
            });
}

void probeGpus(const Sysfs& sysfs, const std::vector<PciDevice>& pci,
               const DiscoverOptions& options, Topology& topology,
               std::vector<std::string>& probes) {
  std::vector<KfdGpuNode> kfd = readKfdGpuNodes(sysfs);
  bool nvswitchOnPci = false;
  for (const PciDevice& device : pci) {
    if (isNvswitch(device)) nvswitchOnPci = true;
    if (device.vendor == kVendorNvidia && isGpuClass(device.classCode)) {
      topology.gpus.push_back(gpuFromPci(device, GpuVendor::kNvidia));
    }
    // Without KFD (no amdgpu compute driver) an AMD display function is all we can see.
    if (device.vendor == kVendorAmd && isGpuClass(device.classCode) && kfd.empty()) {
      topology.gpus.push_back(gpuFromPci(device, GpuVendor::kAmd));
    }
  }
  for (const KfdGpuNode& node : kfd) {
    PciDevice device = readPciDevice(sysfs, node.busId);
    if (device.busId.empty()) device.busId = node.busId;  // sysfs PCI tree hidden (containers)
    Gpu gpu = gpuFromPci(device, GpuVendor::kAmd);
    gpu.arch = node.arch;
    gpu.memoryBytes = node.memoryBytes;
    topology.gpus.push_back(std::move(gpu));
  }
  if (!kfd.empty()) probes.push_back("kfd");

  std::vector<NvmlGpuInfo> nvml;
  bool anyNvidia = std::any_of(topology.gpus.begin(), topology.gpus.end(),
                               [](const Gpu& g) { return g.vendor == GpuVendor::kNvidia; });
  if (options.useVendorLibraries && (anyNvidia || sysfs.exists("/proc/driver/nvidia"))) {
    if (auto library = NvmlLibrary::open()) {
      nvml = library->gpus();
      probes.push_back("nvml");
    }
  }
  for (const NvmlGpuInfo& info : nvml) {
    Gpu* gpu = findGpu(topology, info.busId);
    if (gpu == nullptr) {
      PciDevice device = readPciDevice(sysfs, info.busId);
      if (device.busId.empty()) device.busId = info.busId;
      topology.gpus.push_back(gpuFromPci(device, GpuVendor::kNvidia));
      gpu = &topology.gpus.back();
    }
    if (!info.name.empty()) gpu->name = info.name;
    gpu->arch = info.arch;
    gpu->memoryBytes = info.memoryBytes;
  }

  std::sort(topology.gpus.begin(), topology.gpus.end(),
            [](const Gpu& a, const Gpu& b) { return a.pciBusId < b.pciBusId; });
  for (size_t i = 0; i < topology.gpus.size(); ++i) {
    Gpu& gpu = topology.gpus[i];
    gpu.index = static_cast<int>(i);
    if (gpu.numaNode < 0) gpu.numaNode = numaNodeFromCpus(topology, gpu.cpus);
  }

  if (!nvml.empty()) {
    addNvlinkLinks(nvml, topology);
  } else if (nvswitchOnPci) {
    // No NVML: NVSwitch chips on the PCI bus mean an HGX board whose GPUs all hang off the
    // fabric; the per-GPU link count stays unknown (0).
    for (Gpu& gpu : topology.gpus) {
      if (gpu.vendor != GpuVendor::kNvidia) continue;
      for (Gpu& peer : topology.gpus) {
        if (peer.index <= gpu.index || peer.vendor != GpuVendor::kNvidia) continue;
        GpuLink link;
        link.gpuA = gpu.index;
        link.gpuB = peer.index;
        link.type = LinkType::kNvswitch;
        topology.gpuLinks.push_back(link);
      }
    }
  }
  addXgmiLinks(kfd, topology);
  addPcieLinks(topology);

  bool anyAmd = std::any_of(topology.gpus.begin(), topology.gpus.end(),
                            [](const Gpu& g) { return g.vendor == GpuVendor::kAmd; });
  if (options.useVendorLibraries && anyAmd) {
    auto names = amdGpuNames();
    for (Gpu& gpu : topology.gpus) {
      auto it = names.find(gpu.pciBusId);
      if (it != names.end()) gpu.name = it->second;
    }
    if (!names.empty()) probes.push_back("amdsmi");
  }
}

}  // namespace xccl::topo
