// GPUs and the links between them: PCI functions from sysfs, AMD details and xGMI from KFD
// sysfs, NVIDIA details and NVLink/NVSwitch from NVML, PCIe paths from the sysfs device tree.
#pragma once

#include <string>
#include <vector>

#include "topo/nvml.h"
#include "topo/pci.h"
#include "topo/sysfs.h"
#include "topo/topology.h"

namespace xccl::topo {

// Fills topology.gpus and topology.gpuLinks (CPUs and NUMA nodes must be filled already).
// Appends the names of the probes that contributed ("nvml", "kfd", "amdsmi") to `probes`.
void probeGpus(const Sysfs& sysfs, const std::vector<PciDevice>& pci,
               const DiscoverOptions& options, Topology& topology,
               std::vector<std::string>& probes);

// The pieces, exposed for tests that have no NVML:
// NVLink and NVSwitch links and per-GPU switch link counts from NVML's per-link answers. A link
// whose far end is an NVSwitch, or a PCI function that is not one of the GPUs, counts as a switch
// link; two GPUs that both have switch links are connected through the fabric.
void addNvlinkLinks(const std::vector<NvmlGpuInfo>& nvml, Topology& topology);
// Every GPU pair not yet linked gets a kPcie link; every link gets its PCIe path class.
void addPcieLinks(Topology& topology);
// A product name for well-known PCI ids when no vendor library answers; "" otherwise.
std::string gpuNameFromPciId(uint32_t vendor, uint32_t device);

}  // namespace xccl::topo
