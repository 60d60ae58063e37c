// The fixture machines of tests/fixtures/topo: the file format round trip, and the answers the
// selector will ask for on each platform.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

#include "common/error.h"
#include "threads.h"
#include "topo/affinity.h"
#include "topo/links.h"
#include "topo/pci.h"
#include "topo/topology.h"

namespace xccl::topo {
namespace {

std::string fixturePath(const std::string& name) {
  return std::string(XCCL_TOPO_FIXTURE_DIR) + "/" + name;
}

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Topology load(const std::string& name) { return loadTopologyFile(fixturePath(name)); }

const std::vector<std::string> kFixtures = {"hgx_h100_8x_nvswitch.json", "mi300x_8x_xgmi.json",
                                            "mi250_2node_host0.json",    "mi250_2node_host1.json",
                                            "pcie_4x_l40s.json",         "cpu_vm.json"};

class TopoEveryFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(TopoEveryFixture, ReadsAndRewritesToTheSameText) {
  std::string text = readText(fixturePath(GetParam()));
  ASSERT_FALSE(text.empty());
  Topology topology = fromJson(text);
  EXPECT_EQ(toJson(topology), text);
}

TEST_P(TopoEveryFixture, LinkPathsAgreeWithTheDevicePaths) {
  Topology topology = load(GetParam());
  for (const GpuLink& link : topology.gpuLinks) {
    const Gpu& a = topology.gpus[static_cast<size_t>(link.gpuA)];
    const Gpu& b = topology.gpus[static_cast<size_t>(link.gpuB)];
    EXPECT_EQ(pciPathName(pciPathBetween(a.pciPath, a.numaNode, b.pciPath, b.numaNode)),
              std::string(pciPathName(link.pciPath)))
        << link.gpuA << "-" << link.gpuB;
  }
  // Every GPU pair is described exactly once.
  size_t n = topology.gpus.size();
  EXPECT_EQ(topology.gpuLinks.size(), n * (n > 0 ? n - 1 : 0) / 2);
}

TEST_P(TopoEveryFixture, SurvivesAFileRoundTrip) {
  Topology topology = load(GetParam());
  // Unique per fixture and process: ctest runs the parameterised cases in parallel.
  std::string path =
      ::testing::TempDir() + "xccl_topo_roundtrip_" + std::to_string(::getpid()) + "_" + GetParam();
  writeTopologyFile(topology, path);
  EXPECT_EQ(toJson(loadTopologyFile(path)), toJson(topology));
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Topo, TopoEveryFixture, ::testing::ValuesIn(kFixtures));

TEST(TopoFixtures, HgxH100IsAnNvswitchFabric) {
  Topology t = load("hgx_h100_8x_nvswitch.json");
  ASSERT_EQ(t.gpus.size(), 8u);
  EXPECT_EQ(gpuLinkClass(t), LinkClass::kNvswitch);
  EXPECT_TRUE(isNvswitchFabric(t, {2, 5}));
  EXPECT_FALSE(isFullXgmiMesh(t));
  EXPECT_DOUBLE_EQ(minPairBandwidthGBps(t), 450.0);
  for (const Gpu& gpu : t.gpus) EXPECT_EQ(gpu.nvswitchLinks, 18);
  EXPECT_EQ(numaNodeOfGpu(t, 0), 0);
  EXPECT_EQ(numaNodeOfGpu(t, 7), 1);
  EXPECT_EQ(cpusNearGpu(t, 7), cpusOfNumaNode(t, 1));
  EXPECT_EQ(cpusNearGpu(t, 7).size(), 112u);
  // Each GPU has its own rail NIC on its PCIe switch.
  for (int g = 0; g < 8; ++g) {
    EXPECT_EQ(nearestNics(t, g), std::vector<int>{g}) << g;
    EXPECT_EQ(gpuNicPath(t, g, g), PciPath::kPix);
  }
  EXPECT_EQ(gpuNicPath(t, 0, 7), PciPath::kSys);
  EXPECT_EQ(gpuNicPath(t, 0, 1), PciPath::kNode);
  EXPECT_EQ(gpuIndexByPciBusId(t, "00000000:18:00.0"), 0);
}

TEST(TopoFixtures, Mi300xIsAFullXgmiMesh) {
  Topology t = load("mi300x_8x_xgmi.json");
  EXPECT_EQ(gpuLinkClass(t), LinkClass::kXgmiFullMesh);
  EXPECT_TRUE(isFullXgmiMesh(t));
  EXPECT_TRUE(isFullXgmiMesh(t, {0, 3, 5}));  // any subset of a full mesh is one
  for (const GpuLink& link : t.gpuLinks) {
    EXPECT_EQ(link.type, LinkType::kXgmi);
    EXPECT_EQ(link.count, 1);
    EXPECT_DOUBLE_EQ(link.bandwidthGBps, 64.0);
  }
  EXPECT_EQ(nearestNics(t, 5), std::vector<int>{5});
  EXPECT_EQ(t.nics[5].kind, NicKind::kRoce);
  EXPECT_EQ(nicIndexByName(t, "ens6np0"), 5);  // by netdev
  EXPECT_EQ(numaNodeOfNic(t, 8), 1);           // the front-end NIC
}

TEST(TopoFixtures, Mi250HasAPartialMeshOnBothHosts) {
  for (const char* name : {"mi250_2node_host0.json", "mi250_2node_host1.json"}) {
    Topology t = load(name);
    ASSERT_EQ(t.gpus.size(), 8u) << name;
    EXPECT_EQ(gpuLinkClass(t), LinkClass::kXgmiPartial);
    EXPECT_FALSE(isFullXgmiMesh(t));
    // The two GCDs of one package: 4 links.
    EXPECT_TRUE(isFullXgmiMesh(t, {0, 1}));
    EXPECT_EQ(findGpuLink(t, 1, 0)->count, 4);
    EXPECT_DOUBLE_EQ(minPairBandwidthGBps(t, {0, 1}), 200.0);
    // GCDs 0 and 3 have no direct link: a 4-GCD group is not a mesh.
    EXPECT_EQ(findGpuLink(t, 0, 3)->type, LinkType::kPcie);
    EXPECT_EQ(gpuLinkClass(t, {0, 1, 2, 3}), LinkClass::kXgmiPartial);
    EXPECT_DOUBLE_EQ(minPairBandwidthGBps(t), 0.0);
    // One HDR InfiniBand HCA per package, on the package's NUMA node.
    EXPECT_EQ(nearestNics(t, 0), std::vector<int>{0});
    EXPECT_EQ(nearestNics(t, 7), std::vector<int>{3});
    EXPECT_EQ(t.nics[3].kind, NicKind::kInfiniband);
    EXPECT_EQ(t.nics[3].speedMbps, 200000);
    EXPECT_EQ(numaNodeOfGpu(t, 7), 3);
    EXPECT_EQ(cpusNearNic(t, 3), cpusOfNumaNode(t, 3));
    EXPECT_EQ(t.numaNodes.size(), 4u);
  }
  EXPECT_NE(load("mi250_2node_host0.json").hostName, load("mi250_2node_host1.json").hostName);
}

TEST(TopoFixtures, PcieBoxHasNoInterconnect) {
  Topology t = load("pcie_4x_l40s.json");
  EXPECT_EQ(gpuLinkClass(t), LinkClass::kPcie);
  EXPECT_EQ(findGpuLink(t, 0, 1)->pciPath, PciPath::kPix);
  EXPECT_EQ(findGpuLink(t, 1, 2)->pciPath, PciPath::kSys);
  // The NIC on socket 0 is nearest GPU 0; the down port is never chosen.
  EXPECT_EQ(nearestNics(t, 0), std::vector<int>{0});
  EXPECT_EQ(nearestNics(t, 3), std::vector<int>{0});
  EXPECT_EQ(gpuNicPath(t, 3, 0), PciPath::kSys);
}

TEST(TopoFixtures, CpuVmHasNoGpusAndUnknownDeviceNuma) {
  Topology t = load("cpu_vm.json");
  EXPECT_TRUE(t.virtualMachine);
  EXPECT_TRUE(t.gpus.empty());
  EXPECT_EQ(gpuLinkClass(t), LinkClass::kNone);
  ASSERT_EQ(t.numaNodes.size(), 1u);
  EXPECT_EQ(numaNodeOfNic(t, 0), -1);
  EXPECT_EQ(cpusNearNic(t, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(testing::errorKindOf([&] { numaNodeOfGpu(t, 0); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(testing::errorKindOf([&] { gpuLinkClass(t, {0}); }), ErrorKind::kInvalidArgument);
}

// A minimal valid document with `extra` spliced into its top-level object.
std::string document(const std::string& extra) {
  return R"({"format": "xccl-topology", "version": 1, "numaNodes": [{"id": 0, "cpus": "0-3"}],
             "gpus": [{"index": 0}, {"index": 1}])" +
         extra + "}";
}

TEST(TopoFormat, AcceptsAMinimalDocument) {
  Topology t = fromJson(document(""));
  EXPECT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(t.gpus[1].numaNode, -1);
  EXPECT_EQ(t.gpus[1].vendor, GpuVendor::kOther);
  // Unknown members are ignored, so a newer writer's additions do not break this reader.
  EXPECT_NO_THROW(fromJson(document(R"(, "futureField": {"x": 1})")));
}

TEST(TopoFormat, RejectsBadDocuments) {
  const std::vector<std::string> bad = {
      R"({"format": "xccl-topology", "version": 2})",
      R"({"format": "nccl", "version": 1})",
      R"({"format": "xccl-topology"})",
      R"([1, 2])",
      document(R"(, "gpuLinks": [{"gpus": [0, 2], "type": "xgmi"}])"),
      document(R"(, "gpuLinks": [{"gpus": [1, 1], "type": "xgmi"}])"),
      document(R"(, "gpuLinks": [{"gpus": [0, 1], "type": "xgmi"},
                                 {"gpus": [1, 0], "type": "pcie"}])"),
      document(R"(, "gpuLinks": [{"gpus": [0, 1], "type": "warp"}])"),
      document(R"(, "gpuLinks": [{"gpus": [0, 1], "type": "xgmi", "count": -2}])"),
      document(R"(, "nics": [{"name": "eth0", "numaNode": 3}])"),
      document(R"(, "nics": [{"name": "eth0", "speedMbps": "fast"}])"),
      document(R"(, "nics": [{"kind": "ethernet"}])"),
      document(R"(, "cpus": "0-x")"),
      R"({"format": "xccl-topology", "version": 1, "gpus": [{"index": 1}]})",
      R"({"format": "xccl-topology", "version": 1, "numaNodes": [{"id": 0}, {"id": 0}]})",
  };
  for (const std::string& text : bad) {
    EXPECT_EQ(testing::errorKindOf([&] { fromJson(text); }), ErrorKind::kInvalidArgument) << text;
  }
}

TEST(TopoFormat, NamesTheFileInLoadErrors) {
  try {
    loadTopologyFile(fixturePath("no_such_file.json"));
    FAIL() << "no throw";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("no_such_file.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace xccl::topo
