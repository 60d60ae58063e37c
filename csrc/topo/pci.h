// PCI functions as sysfs shows them, and the path between two of them on the PCIe tree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topo/sysfs.h"
#include "topo/topology.h"

namespace xccl::topo {

struct PciDevice {
  std::string busId;  // "0000:18:00.0"
  std::string path;   // below /sys/devices, "" when the link does not resolve
  uint32_t vendor = 0;
  uint32_t device = 0;
  uint32_t classCode = 0;  // 24 bits: class, subclass, programming interface
  int numaNode = -1;
  std::vector<int> cpus;  // local_cpulist
};

constexpr uint32_t kVendorNvidia = 0x10de;
constexpr uint32_t kVendorAmd = 0x1002;
constexpr uint32_t kVendorAmazon = 0x1d0f;

// Every function under /sys/bus/pci/devices, in bus order.
std::vector<PciDevice> scanPci(const Sysfs& sysfs);
// One function; its busId is "" when /sys/bus/pci/devices/<busId> does not exist.
PciDevice readPciDevice(const Sysfs& sysfs, const std::string& busId);

// Display controller (class 0x03: VGA, 3D, AMD's 0x0380 on MI250) or processing accelerator
// (0x12: MI300X). Callers also check the vendor: other vendors' accelerators use 0x12 too.
bool isGpuClass(uint32_t classCode);
// NVIDIA NVSwitch: vendor NVIDIA with class "bridge, other" (0x0680).
bool isNvswitch(const PciDevice& device);

// Classifies the path between two devices from their sysfs paths: devices under one PCIe switch
// are PIX, deeper common bridges PXB, a shared root complex PHB; different root complexes are
// NODE on one NUMA node and SYS otherwise. Paths of "" fall back on the NUMA nodes alone.
PciPath pciPathBetween(const std::string& pathA, int numaA, const std::string& pathB, int numaB);

}  // namespace xccl::topo
