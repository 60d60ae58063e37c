#include "topo/pci.h"

namespace xccl::topo {
namespace {

std::vector<std::string> splitPath(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start < path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    if (slash > start) parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  return parts;
}

PciPath pathByNuma(int numaA, int numaB) {
  if (numaA >= 0 && numaB >= 0) return numaA == numaB ? PciPath::kNode : PciPath::kSys;
  // The kernel reports -1 everywhere when it has no NUMA information: VMs and single-socket
  // machines, which have one node. One known and one unknown node proves nothing.
  if (numaA < 0 && numaB < 0) return PciPath::kNode;
  return PciPath::kUnknown;
}

}  // namespace

PciDevice readPciDevice(const Sysfs& sysfs, const std::string& busId) {
  PciDevice device;
  std::string base = "/sys/bus/pci/devices/" + busId;
  if (!sysfs.exists(base)) return device;
  device.busId = busId;
  device.path = sysfs.devicePath(base);
  device.vendor = static_cast<uint32_t>(sysfs.readInt(base + "/vendor").value_or(0));
  device.device = static_cast<uint32_t>(sysfs.readInt(base + "/device").value_or(0));
  device.classCode = static_cast<uint32_t>(sysfs.readInt(base + "/class").value_or(0));
  device.numaNode = static_cast<int>(sysfs.readInt(base + "/numa_node").value_or(-1));
  if (device.numaNode < 0) device.numaNode = -1;
  if (auto cpus = sysfs.readLine(base + "/local_cpulist")) {
    try {
      device.cpus = parseCpuList(*cpus);
    } catch (const std::exception&) {
      device.cpus.clear();  // unparsable: treat as unknown rather than fail discovery
    }
  }
  return device;
}

std::vector<PciDevice> scanPci(const Sysfs& sysfs) {
  std::vector<PciDevice> devices;
  for (const std::string& name : sysfs.list("/sys/bus/pci/devices")) {
    if (!isPciBusId(name)) continue;
    devices.push_back(readPciDevice(sysfs, name));
  }
  return devices;
}

bool isGpuClass(uint32_t classCode) {
  return (classCode >> 16) == 0x03 || (classCode >> 16) == 0x12;
}

bool isNvswitch(const PciDevice& device) {
  return device.vendor == kVendorNvidia && (device.classCode >> 8) == 0x0680;
}

PciPath pciPathBetween(const std::string& pathA, int numaA, const std::string& pathB, int numaB) {
  std::vector<std::string> a = splitPath(pathA);
  std::vector<std::string> b = splitPath(pathB);
  if (a.empty() || b.empty() || a[0] != b[0]) return pathByNuma(numaA, numaB);
  size_t common = 0;
  while (common < a.size() && common < b.size() && a[common] == b[common]) ++common;
  if (common == a.size() && common == b.size()) return PciPath::kPix;  // the same function
  // Sharing only "pci0000:xx" means the paths meet at the host bridge.
  if (common == 1) return PciPath::kPhb;
  // Below the deepest shared bridge each device is at most a downstream port plus itself away:
  // both sit on one PCIe switch.
  if (a.size() - common <= 2 && b.size() - common <= 2) return PciPath::kPix;
  return PciPath::kPxb;
}

}  // namespace xccl::topo
