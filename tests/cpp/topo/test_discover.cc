// Discovery against fake sysfs trees shaped like real machines, the NVML link assembly without
// NVML, and the XCCL_TOPO_FILE / XCCL_TOPO_DUMP_FILE switches.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "topo/fake_sysfs.h"
#include "topo/gpu_probe.h"
#include "topo/kfd.h"
#include "topo/links.h"
#include "topo/nic_probe.h"
#include "topo/topology.h"

namespace xccl::topo {
namespace {

using testing::FakeSysfs;

DiscoverOptions offline() {
  DiscoverOptions options;
  options.useVendorLibraries = false;  // never the host's NVML/amdsmi for a fake tree
  options.probeAddresses = false;
  return options;
}

const Nic* nicNamed(const Topology& t, const std::string& name) {
  for (const Nic& nic : t.nics) {
    if (nic.name == name) return &nic;
  }
  return nullptr;
}

// A 2-vCPU VM like the one CI runs on: no NUMA information on devices, a virtio NIC.
void buildCpuVm(FakeSysfs& fs) {
  fs.setCpus("0-1", "AMD EPYC", /*hypervisor=*/true);
  fs.addNumaNode(0, "0-1", "10");
  fs.write("/proc/sys/kernel/hostname", "vm-under-test\n");
  fs.addPci("pci0000:00/0000:00:00.0", 0x8086, 0x1237, 0x060000, -1, "0-1");
  fs.addPci("pci0000:00/0000:00:03.0", 0x1af4, 0x1000, 0x020000, -1, "0-1");
  fs.mkdir("/sys/devices/pci0000:00/0000:00:03.0/virtio2");
  fs.addNetdev("eth0", "pci0000:00/0000:00:03.0/virtio2", 1, "up", 0, 1500, 0x1003, "virtio_net");
  fs.addNetdev("lo", "", 772, "unknown", 0, 65536, 0x9, "");
  fs.addNetdev("ifb0", "", 1, "down", 0, 1500, 0x82, "");    // virtual and down: left out
  fs.addNetdev("docker0", "", 1, "up", 0, 1500, 0x1003, ""); // virtual and up: listed
  fs.addNetdev("veth1a2b", "", 1, "up", 0, 1500, 0x1003, "");
}

TEST(TopoDiscover, CpuOnlyVm) {
  FakeSysfs fs;
  buildCpuVm(fs);
  Topology t = discoverFromRoot(fs.root(), offline());
  EXPECT_EQ(t.hostName, "vm-under-test");
  EXPECT_EQ(t.source, "sysfs");
  EXPECT_TRUE(t.virtualMachine);
  EXPECT_EQ(t.cpuModel, "AMD EPYC");
  EXPECT_EQ(t.cpus, (std::vector<int>{0, 1}));
  ASSERT_EQ(t.numaNodes.size(), 1u);
  EXPECT_EQ(t.numaNodes[0].distances, std::vector<int>{10});
  EXPECT_EQ(t.numaNodes[0].memoryBytes, 1048576LL * 1024);
  EXPECT_TRUE(t.gpus.empty());
  ASSERT_EQ(t.nics.size(), 2u);
  const Nic* eth0 = nicNamed(t, "eth0");
  ASSERT_NE(eth0, nullptr);
  EXPECT_EQ(eth0->kind, NicKind::kEthernet);
  EXPECT_EQ(eth0->pciBusId, "0000:00:03.0");
  EXPECT_EQ(eth0->pciPath, "pci0000:00/0000:00:03.0");
  EXPECT_EQ(eth0->numaNode, -1);
  EXPECT_EQ(eth0->speedMbps, -1);
  EXPECT_EQ(eth0->driver, "virtio_net");
  EXPECT_TRUE(eth0->up);
  EXPECT_FALSE(eth0->isVirtual);
  const Nic* docker = nicNamed(t, "docker0");
  ASSERT_NE(docker, nullptr);
  EXPECT_TRUE(docker->isVirtual);
  EXPECT_EQ(docker->pciBusId, "");
  // What it found survives the file format.
  EXPECT_EQ(toJson(fromJson(toJson(t))), toJson(t));
}

TEST(TopoDiscover, KernelWithoutNumaIsOneNode) {
  FakeSysfs fs;
  fs.setCpus("0-7", "Some CPU", false);
  Topology t = discoverFromRoot(fs.root(), offline());
  EXPECT_FALSE(t.virtualMachine);
  ASSERT_EQ(t.numaNodes.size(), 1u);
  EXPECT_EQ(t.numaNodes[0].id, 0);
  EXPECT_EQ(t.numaNodes[0].cpus.size(), 8u);
}

TEST(TopoDiscover, EmptyTreeYieldsAnEmptyTopology) {
  FakeSysfs fs;
  Topology t = discoverFromRoot(fs.root(), offline());
  EXPECT_TRUE(t.cpus.empty());
  EXPECT_TRUE(t.gpus.empty());
  EXPECT_TRUE(t.nics.empty());
}

// Two MI300X-like GPUs (gfx942) on two NUMA nodes and an MI250-like in-package pair whose
// io_link reports 4x bandwidth, plus a GPU whose numa_node is -1 but whose CPUs are node 1's.
TEST(TopoDiscover, AmdGpusAndXgmiFromKfd) {
  FakeSysfs fs;
  fs.setTwoNodeCpus(8, "AMD EPYC 9654", 32);
  fs.addPci("pci0000:00/0000:00:01.0/0000:05:00.0", 0x1002, 0x74a1, 0x120000, 0, "0-3");
  fs.addPci("pci0000:80/0000:80:01.0/0000:85:00.0", 0x1002, 0x74a1, 0x120000, -1, "4-7");
  fs.addPci("pci0000:80/0000:80:01.0/0000:86:00.0", 0x1002, 0x74a1, 0x120000, 1, "4-7");
  fs.addKfdNode(0, {{"simd_count", 0}, {"cpu_cores_count", 8}}, {});
  auto gpuProps = [](int bus) {
    return std::map<std::string, long long>{{"simd_count", 1216},
                                            {"gfx_target_version", 90402},
                                            {"domain", 0},
                                            {"location_id", bus << 8}};
  };
  auto xgmi = [](int to, long long minBw, long long maxBw) {
    return std::map<std::string, long long>{{"type", kKfdLinkXgmi},   {"node_from", 0},
                                            {"node_to", to},          {"weight", 15},
                                            {"min_bandwidth", minBw}, {"max_bandwidth", maxBw}};
  };
  std::map<std::string, long long> toCpu = {{"type", kKfdLinkPcie}, {"node_to", 0}};
  fs.addKfdNode(1, gpuProps(0x05), {toCpu, xgmi(2, 64000, 64000), xgmi(3, 64000, 64000)},
                206141652992);
  fs.addKfdNode(2, gpuProps(0x85), {toCpu, xgmi(1, 64000, 64000), xgmi(3, 50000, 200000)});
  fs.addKfdNode(3, gpuProps(0x86), {toCpu, xgmi(1, 64000, 64000), xgmi(2, 50000, 200000)});

  Topology t = discoverFromRoot(fs.root(), offline());
  EXPECT_EQ(t.source, "sysfs+kfd");
  ASSERT_EQ(t.gpus.size(), 3u);
  EXPECT_EQ(t.gpus[0].pciBusId, "0000:05:00.0");
  EXPECT_EQ(t.gpus[0].arch, "gfx942");
  EXPECT_EQ(t.gpus[0].vendor, GpuVendor::kAmd);
  EXPECT_EQ(t.gpus[0].name, "AMD Instinct MI300X");
  EXPECT_EQ(t.gpus[0].memoryBytes, 206141652992);
  EXPECT_EQ(t.gpus[0].numaNode, 0);
  EXPECT_EQ(t.gpus[1].numaNode, 1);  // -1 in sysfs; placed by its local CPUs
  EXPECT_EQ(gpuLinkClass(t), LinkClass::kXgmiFullMesh);
  EXPECT_EQ(findGpuLink(t, 0, 1)->count, 1);
  EXPECT_DOUBLE_EQ(findGpuLink(t, 0, 1)->bandwidthGBps, 64.0);
  EXPECT_EQ(findGpuLink(t, 0, 1)->pciPath, PciPath::kSys);
  EXPECT_EQ(findGpuLink(t, 1, 2)->count, 4);
  EXPECT_DOUBLE_EQ(findGpuLink(t, 1, 2)->bandwidthGBps, 200.0);
  EXPECT_EQ(findGpuLink(t, 1, 2)->pciPath, PciPath::kPix);
}

TEST(TopoDiscover, GfxArchNames) {
  EXPECT_EQ(gfxArchName(90402), "gfx942");
  EXPECT_EQ(gfxArchName(90010), "gfx90a");
  EXPECT_EQ(gfxArchName(110000), "gfx1100");
  EXPECT_EQ(gfxArchName(0), "");
}

// An HGX board seen without NVML: NVSwitch chips on the PCI bus imply the fabric.
TEST(TopoDiscover, NvidiaGpusWithNvswitchOnPci) {
  FakeSysfs fs;
  fs.setCpus("0-3", "Xeon", false);
  fs.addNumaNode(0, "0-3", "10");
  fs.addPci("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0", 0x10de, 0x2330,
            0x030200, 0, "0-3");
  fs.addPci("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0", 0x10de, 0x2330,
            0x030200, 0, "0-3");
  fs.addPci("pci0000:00/0000:00:05.0/0000:07:00.0", 0x10de, 0x22a3, 0x068000, 0, "0-3");
  fs.addPci("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.1", 0x10de, 0x22ba,
            0x040300, 0, "0-3");  // the GPU's audio function: not a GPU
  Topology t = discoverFromRoot(fs.root(), offline());
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(t.gpus[1].pciBusId, "0000:19:00.0");
  EXPECT_EQ(t.gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpuLinkClass(t), LinkClass::kNvswitch);
  EXPECT_EQ(findGpuLink(t, 0, 1)->count, 0);  // unknown without NVML
  EXPECT_EQ(findGpuLink(t, 0, 1)->pciPath, PciPath::kPix);
}

TEST(TopoDiscover, NvidiaGpusOnPcieOnly) {
  FakeSysfs fs;
  fs.setTwoNodeCpus(4, "Xeon", 20);
  fs.addPci("pci0000:30/0000:30:01.0/0000:31:00.0", 0x10de, 0x26b9, 0x030200, 0, "0-1");
  fs.addPci("pci0000:b0/0000:b0:01.0/0000:b1:00.0", 0x10de, 0x26b9, 0x030200, 1, "2-3");
  Topology t = discoverFromRoot(fs.root(), offline());
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(gpuLinkClass(t), LinkClass::kPcie);
  EXPECT_EQ(findGpuLink(t, 0, 1)->pciPath, PciPath::kSys);
  EXPECT_EQ(t.gpus[1].numaNode, 1);
  EXPECT_EQ(t.gpus[1].cpus, (std::vector<int>{2, 3}));
}

TEST(TopoDiscover, RdmaPortsOfEveryKind) {
  FakeSysfs fs;
  fs.setTwoNodeCpus(4, "Xeon", 20);
  fs.addPci("pci0000:c0/0000:c0:01.0/0000:c1:00.0", 0x15b3, 0x101b, 0x020700, 1, "2-3");
  fs.addRdmaPort("mlx5_0", "pci0000:c0/0000:c0:01.0/0000:c1:00.0", 1, "4: ACTIVE", "InfiniBand",
                 "200 Gb/sec (4X HDR)", "ib0", "mlx5_core");
  fs.addPci("pci0000:40/0000:40:01.0/0000:41:00.0", 0x15b3, 0x1021, 0x020000, 0, "0-1");
  fs.addRdmaPort("mlx5_1", "pci0000:40/0000:40:01.0/0000:41:00.0", 1, "1: DOWN", "Ethernet",
                 "400 Gb/sec (4X NDR)", "ens1np0", "mlx5_core");
  fs.addPci("pci0000:10/0000:10:01.0/0000:11:00.0", 0x1d0f, 0xefa1, 0x020000, 0, "0-1");
  fs.addRdmaPort("rdmap17s0", "pci0000:10/0000:10:01.0/0000:11:00.0", 1, "4: ACTIVE", "Unspecified",
                 "100 Gb/sec", "", "efa");
  Topology t = discoverFromRoot(fs.root(), offline());
  const Nic* ib = nicNamed(t, "mlx5_0");
  ASSERT_NE(ib, nullptr);
  EXPECT_EQ(ib->kind, NicKind::kInfiniband);
  EXPECT_EQ(ib->port, 1);
  EXPECT_EQ(ib->netdev, "ib0");
  EXPECT_EQ(ib->speedMbps, 200000);
  EXPECT_TRUE(ib->up);
  EXPECT_EQ(ib->numaNode, 1);
  EXPECT_EQ(ib->pciBusId, "0000:c1:00.0");
  EXPECT_EQ(ib->driver, "mlx5_core");
  const Nic* roce = nicNamed(t, "mlx5_1");
  ASSERT_NE(roce, nullptr);
  EXPECT_EQ(roce->kind, NicKind::kRoce);
  EXPECT_EQ(roce->netdev, "ens1np0");
  EXPECT_FALSE(roce->up);
  const Nic* efa = nicNamed(t, "rdmap17s0");
  ASSERT_NE(efa, nullptr);
  EXPECT_EQ(efa->kind, NicKind::kEfa);  // by driver and by vendor 0x1d0f
  EXPECT_EQ(efa->speedMbps, 100000);
  // The RDMA ports' netdevs are not listed a second time.
  EXPECT_EQ(nicNamed(t, "ib0"), nullptr);
  EXPECT_EQ(nicNamed(t, "ens1np0"), nullptr);
  EXPECT_EQ(t.nics.size(), 3u);
}

TEST(TopoDiscover, RdmaRateParsing) {
  EXPECT_EQ(parseRdmaRateMbps("200 Gb/sec (4X HDR)"), 200000);
  EXPECT_EQ(parseRdmaRateMbps("2.5 Gb/sec (1X SDR)"), 2500);
  EXPECT_EQ(parseRdmaRateMbps("unknown"), -1);
}

Topology fourGpus(const std::string& arch) {
  Topology t;
  for (int i = 0; i < 4; ++i) {
    Gpu gpu;
    gpu.index = i;
    gpu.vendor = GpuVendor::kNvidia;
    gpu.arch = arch;
    gpu.pciBusId = "0000:0" + std::to_string(i + 1) + ":00.0";
    t.gpus.push_back(gpu);
  }
  return t;
}

TEST(TopoNvlinkAssembly, SwitchLinksMakeAFabric) {
  Topology t = fourGpus("sm90");
  std::vector<NvmlGpuInfo> nvml;
  for (const Gpu& gpu : t.gpus) {
    NvmlGpuInfo info;
    info.busId = gpu.pciBusId;
    // 18 links to 4 switches; one switch's remote id is reported without the device type
    // (old drivers): a far end that is not a GPU still counts as a switch.
    for (int l = 0; l < 18; ++l) {
      info.links.push_back({"0000:a" + std::to_string(l % 4) + ":00.0", l % 4 != 3});
    }
    nvml.push_back(info);
  }
  nvml[3].links.resize(16);  // two links down on GPU 3
  addNvlinkLinks(nvml, t);
  addPcieLinks(t);
  EXPECT_EQ(gpuLinkClass(t), LinkClass::kNvswitch);
  EXPECT_EQ(t.gpus[0].nvswitchLinks, 18);
  EXPECT_EQ(t.gpus[3].nvswitchLinks, 16);
  EXPECT_EQ(findGpuLink(t, 0, 1)->count, 18);
  EXPECT_DOUBLE_EQ(findGpuLink(t, 0, 1)->bandwidthGBps, 450.0);
  EXPECT_EQ(findGpuLink(t, 2, 3)->count, 16);
  EXPECT_DOUBLE_EQ(minPairBandwidthGBps(t), 400.0);
}

TEST(TopoNvlinkAssembly, DirectLinksArePartial) {
  // GPU pairs bridged directly (0-1 by 4 links, 2-3 by 4), nothing between the pairs.
  Topology t = fourGpus("sm80");
  std::vector<NvmlGpuInfo> nvml(4);
  for (int i = 0; i < 4; ++i) {
    nvml[i].busId = t.gpus[i].pciBusId;
    int peer = i ^ 1;
    for (int l = 0; l < 4; ++l) nvml[i].links.push_back({t.gpus[peer].pciBusId, false});
  }
  nvml[1].links.pop_back();  // a link up on one end only does not count
  addNvlinkLinks(nvml, t);
  addPcieLinks(t);
  EXPECT_EQ(gpuLinkClass(t), LinkClass::kNvlinkPartial);
  EXPECT_EQ(findGpuLink(t, 0, 1)->type, LinkType::kNvlink);
  EXPECT_EQ(findGpuLink(t, 0, 1)->count, 3);
  EXPECT_EQ(findGpuLink(t, 2, 3)->count, 4);
  EXPECT_DOUBLE_EQ(findGpuLink(t, 2, 3)->bandwidthGBps, 100.0);
  EXPECT_EQ(findGpuLink(t, 1, 2)->type, LinkType::kPcie);
  EXPECT_EQ(gpuLinkClass(t, {2, 3}), LinkClass::kNvlinkPartial);
  EXPECT_EQ(t.gpuLinks.size(), 6u);
}

TEST(TopoDiscover, ThisMachineDoesNotThrowAndRoundTrips) {
  Topology t = discoverFromRoot("/");
  EXPECT_FALSE(t.cpus.empty());
  EXPECT_FALSE(t.numaNodes.empty());
  EXPECT_FALSE(t.hostName.empty());
  EXPECT_EQ(toJson(fromJson(toJson(t))), toJson(t));
}

// Only this test calls discover(): it reads XCCL_TOPO_* once per process and caches.
TEST(TopoDiscover, HonoursTopoFileAndDumpFile) {
  std::string fixture = std::string(XCCL_TOPO_FIXTURE_DIR) + "/mi300x_8x_xgmi.json";
  std::string dump =
      ::testing::TempDir() + "xccl_topo_dump_" + std::to_string(::getpid()) + ".json";
  std::remove(dump.c_str());
  ::setenv("XCCL_TOPO_FILE", fixture.c_str(), 1);
  ::setenv("XCCL_TOPO_DUMP_FILE", dump.c_str(), 1);
  Topology t = discover();
  EXPECT_EQ(t.hostName, "mi300x-01");
  EXPECT_EQ(gpuLinkClass(t), LinkClass::kXgmiFullMesh);
  Topology dumped = loadTopologyFile(dump);
  EXPECT_EQ(toJson(dumped), toJson(t));
  EXPECT_EQ(toJson(discover()), toJson(t));  // cached
  std::remove(dump.c_str());
}

}  // namespace
}  // namespace xccl::topo
