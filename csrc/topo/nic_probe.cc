#include "topo/nic_probe.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "topo/cpu_probe.h"
#include "topo/pci.h"

namespace xccl::topo {
namespace {

constexpr int64_t kArphrdInfiniband = 32;  // IPoIB netdevs (if_arp.h)
constexpr int64_t kArphrdLoopback = 772;
constexpr int64_t kIffUp = 0x1;

// The PCI function below a device path, its place and NUMA node; untouched when virtual.
void placeOnPci(const Sysfs& sysfs, const std::string& devicePath, const Topology& topology,
                Nic& nic) {
  nic.pciBusId = pciBusIdFromDevicePath(devicePath);
  if (nic.pciBusId.empty()) return;
  PciDevice device = readPciDevice(sysfs, nic.pciBusId);
  // The device path may run on below the function (".../0000:00:03.0/virtio2"); keep the
  // function's own path so it compares with GPU paths.
  nic.pciPath = device.path.empty()
                    ? devicePath.substr(0, devicePath.find(nic.pciBusId) + nic.pciBusId.size())
                    : device.path;
  nic.numaNode = device.numaNode >= 0 ? device.numaNode : numaNodeFromCpus(topology, device.cpus);
  nic.cpus = device.cpus;
  if (device.vendor == kVendorAmazon && nic.kind != NicKind::kEthernet) nic.kind = NicKind::kEfa;
}

// The netdev of RDMA port `port`: RoCE ports name it in their GID table; otherwise match the
// netdevs under the PCI function by dev_port (0-based port index).
std::string netdevOfPort(const Sysfs& sysfs, const std::string& hca, int port) {
  std::string portDir = "/sys/class/infiniband/" + hca + "/ports/" + std::to_string(port);
  if (auto ndev = sysfs.readLine(portDir + "/gid_attrs/ndevs/0"); ndev && !ndev->empty()) {
    return *ndev;
  }
  std::vector<std::string> netdevs = sysfs.list("/sys/class/infiniband/" + hca + "/device/net");
  if (netdevs.size() == 1) return netdevs[0];
  for (const std::string& name : netdevs) {
    if (sysfs.readInt("/sys/class/net/" + name + "/dev_port").value_or(-1) == port - 1) {
      return name;
    }
  }
  return "";
}

void probeRdma(const Sysfs& sysfs, Topology& topology, std::set<std::string>& claimedNetdevs) {
  for (const std::string& hca : sysfs.list("/sys/class/infiniband")) {
    std::string base = "/sys/class/infiniband/" + hca;
    std::string devicePath = sysfs.devicePath(base + "/device");
    std::string driver = sysfs.linkBasename(base + "/device/driver");
    for (const std::string& portName : sysfs.list(base + "/ports")) {
      int port = std::atoi(portName.c_str());
      if (port <= 0) continue;
      std::string portDir = base + "/ports/" + portName;
      Nic nic;
      nic.name = hca;
      nic.port = port;
      nic.driver = driver;
      std::string layer = sysfs.readLine(portDir + "/link_layer").value_or("");
      if (driver == "efa" || hca.compare(0, 3, "efa") == 0) {
        nic.kind = NicKind::kEfa;
      } else if (layer == "InfiniBand") {
        nic.kind = NicKind::kInfiniband;
      } else if (layer == "Ethernet") {
        nic.kind = NicKind::kRoce;
      } else {
        nic.kind = NicKind::kOther;
      }
      // "4: ACTIVE"
      nic.up = sysfs.readLine(portDir + "/state").value_or("").find("ACTIVE") != std::string::npos;
      nic.speedMbps = parseRdmaRateMbps(sysfs.readLine(portDir + "/rate").value_or(""));
      nic.netdev = netdevOfPort(sysfs, hca, port);
      if (!nic.netdev.empty()) {
        claimedNetdevs.insert(nic.netdev);
        nic.mtu =
            static_cast<int>(sysfs.readInt("/sys/class/net/" + nic.netdev + "/mtu").value_or(0));
      }
      placeOnPci(sysfs, devicePath, topology, nic);
      topology.nics.push_back(std::move(nic));
    }
  }
}

void probeNetdevs(const Sysfs& sysfs, Topology& topology,
                  const std::set<std::string>& claimedNetdevs) {
  for (const std::string& name : sysfs.list("/sys/class/net")) {
    if (claimedNetdevs.count(name) || name.compare(0, 4, "veth") == 0) continue;
    std::string base = "/sys/class/net/" + name;
    int64_t type = sysfs.readInt(base + "/type").value_or(0);
    if (type == kArphrdLoopback || name == "lo") continue;
    std::string devicePath = sysfs.devicePath(base + "/device");
    bool isVirtual = devicePath.empty();
    int64_t flags = sysfs.readInt(base + "/flags").value_or(0);
    if (isVirtual && (flags & kIffUp) == 0) continue;
    Nic nic;
    nic.name = name;
    nic.netdev = name;
    nic.kind = type == 1 ? NicKind::kEthernet
                         : (type == kArphrdInfiniband ? NicKind::kInfiniband : NicKind::kOther);
    nic.isVirtual = isVirtual;
    nic.driver = sysfs.linkBasename(base + "/device/driver");
    std::string operstate = sysfs.readLine(base + "/operstate").value_or("");
    // Some drivers never report an operstate ("unknown") yet pass traffic when up with carrier.
    nic.up = operstate == "up" || (operstate == "unknown" && (flags & kIffUp) != 0 &&
                                   sysfs.readInt(base + "/carrier").value_or(0) == 1);
    int64_t speed = sysfs.readInt(base + "/speed").value_or(-1);
    nic.speedMbps = speed > 0 ? speed : -1;
    nic.mtu = static_cast<int>(sysfs.readInt(base + "/mtu").value_or(0));
    if (!isVirtual) placeOnPci(sysfs, devicePath, topology, nic);
    topology.nics.push_back(std::move(nic));
  }
}

void probeAddresses(Topology& topology) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return;
  std::map<std::string, std::vector<std::string>> byName;
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    int family = entry->ifa_addr->sa_family;
    if (family == AF_INET) {
      auto* in = reinterpret_cast<sockaddr_in*>(entry->ifa_addr);
      ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    } else if (family == AF_INET6) {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(entry->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;  // not routable between hosts
      ::inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    } else {
      continue;
    }
    byName[entry->ifa_name].push_back(text);
  }
  ::freeifaddrs(list);
  for (Nic& nic : topology.nics) {
    auto it = byName.find(nic.netdev);
    if (it != byName.end()) nic.addresses = it->second;
  }
}

}  // namespace

int64_t parseRdmaRateMbps(const std::string& rate) {
  char* end = nullptr;
  double gbps = std::strtod(rate.c_str(), &end);
  if (end == rate.c_str() || gbps <= 0) return -1;
  return static_cast<int64_t>(gbps * 1000.0 + 0.5);
}

void probeNics(const Sysfs& sysfs, const DiscoverOptions& options, Topology& topology) {
  std::set<std::string> claimed;
  probeRdma(sysfs, topology, claimed);
  probeNetdevs(sysfs, topology, claimed);
  if (options.probeAddresses) probeAddresses(topology);
}

}  // namespace xccl::topo
