// The machine's topology as a plain value: CPUs and NUMA nodes, GPUs and the links between them,
// network interfaces, and where each device sits on the PCIe tree.
//
// discover() probes the running machine without root (sysfs, KFD sysfs, NVML and amdsmi through
// dlopen when present) or loads a file instead (XCCL_TOPO_FILE), so a job can be planned for a
// machine it cannot see (a VM with a flattened PCIe tree) and the selector can be unit-tested on
// fixture machines. The file format is JSON, versioned, and documented in docs/topology.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace xccl::topo {

// Bumped on any change that an older reader would misread; readers reject other versions.
constexpr int kFormatVersion = 1;
constexpr const char* kFormatName = "xccl-topology";

enum class GpuVendor { kNvidia, kAmd, kOther };

enum class LinkType {
  kNvlink,    // direct NVLink between the two GPUs (bridges, DGX-1-style hybrid cube mesh)
  kNvswitch,  // both GPUs reach an NVSwitch fabric: every pair gets full per-GPU NVLink bandwidth
  kXgmi,  // direct AMD xGMI (Infinity Fabric) links
  kPcie,  // no GPU interconnect: peer traffic crosses PCIe (and maybe the CPU interconnect)
};

// How the PCIe path between two devices runs, in the vocabulary of `nvidia-smi topo -m` and NCCL
// (best first): same PCIe switch, several bridges without the host bridge, through the host bridge
// of one root complex, between host bridges of one NUMA node, across the CPU interconnect.
enum class PciPath { kPix, kPxb, kPhb, kNode, kSys, kUnknown };

enum class NicKind {
  kEthernet,  // a netdev without RDMA (TCP only)
  kInfiniband,  // an RDMA port with link layer InfiniBand
  kRoce,  // an RDMA port with link layer Ethernet
  kEfa,  // AWS Elastic Fabric Adapter (libfabric "efa" provider, not IB verbs for NCCL)
  kOther,  // an RDMA device of some other kind
};

struct NumaNode {
  int id = 0;
  std::vector<int> cpus;
  std::vector<int> distances;  // the SLIT row, indexed like Topology::numaNodes; 10 = local
  int64_t memoryBytes = 0;  // 0 when unknown
};

struct Gpu {
  int index = 0;  // position in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID and HIP agree)
  GpuVendor vendor = GpuVendor::kOther;
  std::string name;  // "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X"; may be ""
  std::string arch;  // "sm90", "gfx942"; may be ""
  std::string pciBusId;  // "0000:18:00.0"
  std::string pciPath;  // below /sys/devices: "pci0000:15/0000:15:01.0/.../0000:18:00.0"
  int numaNode = -1;  // -1: unknown (VMs, single-node boxes)
  std::vector<int> cpus;  // local_cpulist of its PCI function; may be empty
  int64_t memoryBytes = 0;
  int nvswitchLinks = 0;  // active NVLinks that end at an NVSwitch
};

// One entry per unordered GPU pair that can talk (gpuA < gpuB).
struct GpuLink {
  int gpuA = 0;
  int gpuB = 0;
  LinkType type = LinkType::kPcie;
  // Bonded links between the pair (NVLink, xGMI); for kNvswitch the smaller of the two GPUs'
  // NVSwitch link counts; 0 when the count is unknown (e.g. inferred from sysfs alone).
  int count = 0;
  double bandwidthGBps = 0;  // one direction, 10^9 B/s; 0 when unknown
  PciPath pciPath = PciPath::kUnknown;  // how the pair's PCIe path runs (meaningful for kPcie)
};

struct Nic {
  std::string name;  // RDMA device ("mlx5_0", "efa_0") or netdev ("eth0")
  NicKind kind = NicKind::kEthernet;
  int port = 0;  // RDMA port number; 0 for plain netdevs
  std::string netdev;  // the netdev of an RDMA port ("ib0"), or the name itself for netdevs
  std::string driver;  // kernel driver ("mlx5_core", "virtio_net"); may be ""
  std::string pciBusId;
  std::string pciPath;
  int numaNode = -1;
  std::vector<int> cpus;
  int64_t speedMbps = -1;  // -1 when unknown (virtio reports none)
  bool up = false;  // netdev operstate "up", or RDMA port state ACTIVE
  int mtu = 0;
  bool isVirtual = false;  // no backing device (bridges, veth, bonds, tunnels)
  std::vector<std::string> addresses;  // IPv4/IPv6 addresses of the netdev, when probed
};

struct Topology {
  int version = kFormatVersion;
  std::string hostName;
  std::string source;  // what produced it: "sysfs", "sysfs+nvml", a fixture's description
  bool virtualMachine = false;
  std::string cpuModel;
  std::vector<int> cpus;  // online CPUs
  std::vector<NumaNode> numaNodes;
  std::vector<Gpu> gpus;
  std::vector<GpuLink> gpuLinks;
  std::vector<Nic> nics;
};

struct DiscoverOptions {
  bool useVendorLibraries = true;  // dlopen NVML and amdsmi when present
  bool probeAddresses = true;  // getifaddrs(): the running host only, not a fake root
  std::string hostName;  // "" means gethostname()
};

// The running machine: loads XCCL_TOPO_FILE when set instead of probing, then writes the result
// to XCCL_TOPO_DUMP_FILE when set. Probes once per process; later calls return the same value.
Topology discover();
// Probes the tree below `sysfsRoot` ("/" for the real machine; tests pass a fake tree holding
// sys/, proc/ and dev/). Never throws for missing or odd files: absent facts stay unknown.
Topology discoverFromRoot(const std::string& sysfsRoot, const DiscoverOptions& options = {});

// Serialisation (docs/topology.md). fromJson throws kInvalidArgument on malformed text, a
// different format name or version, or references that do not resolve (a link to GPU 9 of 8).
std::string toJson(const Topology& topology);
Topology fromJson(const std::string& text);
// A topology file: a regular file (common/files.h) of at most kMaxTopologyFileBytes (the largest
// fixture is tens of KiB).
constexpr size_t kMaxTopologyFileBytes = 16 << 20;
Topology loadTopologyFile(const std::string& path);
void writeTopologyFile(const Topology& topology, const std::string& path);

const char* gpuVendorName(GpuVendor vendor);
const char* linkTypeName(LinkType type);
const char* pciPathName(PciPath path);
const char* nicKindName(NicKind kind);

}  // namespace xccl::topo
