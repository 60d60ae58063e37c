// CPU affinity: the thread pinning that progress threads use, and where they should run.
#include <gtest/gtest.h>

#include <thread>

#include "topo/affinity.h"
#include "topo/sysfs.h"

namespace xccl::topo {
namespace {

TEST(TopoAffinity, AllowedCpusAreKnown) {
  std::vector<int> cpus = allowedCpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
}

// Runs on a fresh thread so pinning never leaks into the rest of the test process.
TEST(TopoAffinity, PinsTheCallingThreadOnly) {
  std::vector<int> before = allowedCpus();
  std::vector<int> inside;
  bool pinned = false;
  std::thread([&] {
    pinned = pinCurrentThreadToCpus({before.back()});
    inside = allowedCpus();
  }).join();
  EXPECT_TRUE(pinned);
  EXPECT_EQ(inside, std::vector<int>{before.back()});
  EXPECT_EQ(allowedCpus(), before);
}

TEST(TopoAffinity, LeavesTheThreadAloneWhenNoCpuIsAllowed) {
  std::vector<int> before = allowedCpus();
  std::vector<int> inside;
  bool pinned = true;
  std::thread([&] {
    pinned = pinCurrentThreadToCpus({7999});
    inside = allowedCpus();
  }).join();
  EXPECT_FALSE(pinned);
  EXPECT_EQ(inside, before);
  std::thread([&] { pinned = pinCurrentThreadToCpus({}); }).join();
  EXPECT_FALSE(pinned);
}

TEST(TopoAffinity, PinsToTheIntersectionWithTheAllowedSet) {
  std::vector<int> before = allowedCpus();
  std::vector<int> inside;
  std::thread([&] {
    EXPECT_TRUE(pinCurrentThreadToCpus({before.front(), 7999}));
    inside = allowedCpus();
  }).join();
  EXPECT_EQ(inside, std::vector<int>{before.front()});
}

Topology fixture(const std::string& name) {
  return loadTopologyFile(std::string(XCCL_TOPO_FIXTURE_DIR) + "/" + name);
}

TEST(TopoProgressCpus, FindsNicsByAddress) {
  Topology t = fixture("mi300x_8x_xgmi.json");
  EXPECT_EQ(nicIndexByAddress(t, "192.168.6.11"), 5);
  EXPECT_EQ(nicIndexByAddress(t, "192.168.6.11:29500"), 5);
  EXPECT_EQ(nicIndexByAddress(t, "10.20.0.5"), 8);
  EXPECT_EQ(nicIndexByAddress(t, "127.0.0.1"), -1);
  EXPECT_EQ(nicIndexByAddress(t, ""), -1);
  t.nics[0].addresses = {"fd00::11"};
  EXPECT_EQ(nicIndexByAddress(t, "fd00::11"), 0);
  EXPECT_EQ(nicIndexByAddress(t, "[fd00::11]:0"), 0);
}

// The NIC that carries the traffic decides, then the GPU; nothing known means no pinning.
TEST(TopoProgressCpus, NicFirstThenGpu) {
  Topology t = fixture("hgx_h100_8x_nvswitch.json");
  const std::vector<int> node0 = parseCpuList("0-55,112-167");
  const std::vector<int> node1 = parseCpuList("56-111,168-223");
  EXPECT_EQ(progressCpusFor(t, 5, ""), node1);
  EXPECT_EQ(progressCpusFor(t, 5, "mlx5_0"), node0);        // by name
  EXPECT_EQ(progressCpusFor(t, 2, "ibp207s0"), node1);      // by netdev (mlx5_6)
  EXPECT_EQ(progressCpusFor(t, 5, "10.10.1.11:0"), node0);  // eno1, by the listen address
  EXPECT_EQ(progressCpusFor(t, 5, "127.0.0.1"), node1);     // loopback: not a NIC; the GPU
  EXPECT_EQ(progressCpusFor(t, -1, "mlx5_7"), node1);
  EXPECT_TRUE(progressCpusFor(t, -1, "").empty());
  EXPECT_TRUE(progressCpusFor(t, 99, "no_such_nic").empty());  // unknown: no throw, no pinning
}

TEST(TopoProgressCpus, FollowsNumaNodesPerPackage) {
  Topology t = fixture("mi250_2node_host0.json");
  EXPECT_EQ(progressCpusFor(t, 6, ""), cpusOfNumaNode(t, 3));
  EXPECT_EQ(progressCpusFor(t, 6, "mlx5_2"), cpusOfNumaNode(t, 2));
  EXPECT_EQ(progressCpusFor(t, 0, "ib1"), cpusOfNumaNode(t, 1));
}

// One NUMA node, or a virtual NIC without placement: every CPU is as good as any other.
TEST(TopoProgressCpus, NoPreferenceMeansNoPinning) {
  Topology vm = fixture("cpu_vm.json");
  EXPECT_TRUE(progressCpusFor(vm, -1, "eth0").empty());
  EXPECT_TRUE(progressCpusFor(vm, -1, "192.0.2.10").empty());
  Topology h100 = fixture("hgx_h100_8x_nvswitch.json");
  h100.nics[8].cpus.clear();
  h100.nics[8].numaNode = -1;  // eno1 as a virtual device without a NUMA node
  EXPECT_EQ(progressCpusFor(h100, 4, "eno1"), cpusNearGpu(h100, 4));
  EXPECT_TRUE(progressCpusFor(h100, -1, "eno1").empty());
}

}  // namespace
}  // namespace xccl::topo
