// Selection on GPUs (gpu_plan.h) over the fixture machines of tests/fixtures/topo: expected
// decisions at and around every threshold, and properties over a grid of sizes and world sizes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "algo/gpu_plan.h"
#include "common/error.h"
#include "threads.h"

namespace xccl::algo {
namespace {

topo::Topology load(const std::string& name) {
  return topo::loadTopologyFile(std::string(XCCL_TOPO_FIXTURE_DIR) + "/" + name);
}

const std::vector<std::string> kFixtures = {"hgx_h100_8x_nvswitch.json", "mi300x_8x_xgmi.json",
                                            "mi250_2node_host0.json",    "mi250_2node_host1.json",
                                            "pcie_4x_l40s.json",         "cpu_vm.json"};

constexpr GpuCollective kCollectives[] = {GpuCollective::kAllReduce, GpuCollective::kReduce,
                                          GpuCollective::kAllGather, GpuCollective::kReduceScatter,
                                          GpuCollective::kBroadcast, GpuCollective::kAllToAll};

GpuRequest request(GpuCollective collective, size_t bytes, int world, int ranksPerGpu = 1,
                   std::vector<int> gpus = {}, int hosts = 1) {
  GpuRequest r;
  r.collective = collective;
  r.bytes = bytes;
  r.dtype = DataType::kBFloat16;
  r.worldSize = world;
  r.ranksPerGpu = ranksPerGpu;
  r.gpus = std::move(gpus);
  r.hosts = hosts;
  r.kernelsVerified = true;  // the kernel rules; unverified machines: GpuPlanUnverified below
  return r;
}

// The plan's short name ("one_shot", "nccl", "host", ...).
std::string nameOf(const GpuRequest& r, const topo::Topology& t, const Tunables& tunables = {}) {
  return planGpu(r, t, tunables).name;
}

// Expects the plan of `r` on `t` (default tunables) to be `name` over `fabric`.
void expectPlan(const GpuRequest& r, const topo::Topology& t, const std::string& name,
                GpuFabric fabric) {
  const GpuPlan plan = planGpu(r, t, {});
  const std::string where = std::string(gpuCollectiveName(r.collective)) + " " +
                            std::to_string(r.bytes) + " B, world " + std::to_string(r.worldSize) +
                            ", " + std::to_string(r.ranksPerGpu) + " per GPU";
  EXPECT_EQ(plan.name, name) << where;
  EXPECT_EQ(plan.fabric, fabric) << where;
}

// all_reduce's kernel thresholds at their edges: one-shot below `oneShotBytes` at 8 ranks (below
// twice that at 4), two-shot from there up to `kernelBytes`, `vendor`'s library above it.
// `ar(bytes, world)` is the plan's name on the machine under test.
void expectAllReduceEdges(const std::function<std::string(size_t, int)>& ar, size_t oneShotBytes,
                          size_t kernelBytes, const char* vendor) {
  EXPECT_EQ(ar(oneShotBytes - 1, 8), "one_shot");
  EXPECT_EQ(ar(oneShotBytes, 8), "two_shot");
  EXPECT_EQ(ar(2 * oneShotBytes - 1, 4), "one_shot");
  EXPECT_EQ(ar(2 * oneShotBytes, 4), "two_shot");
  EXPECT_EQ(ar(kernelBytes, 8), "two_shot");
  EXPECT_EQ(ar(kernelBytes + 1, 8), vendor);
}

std::vector<int> range(int n, int first = 0) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(first + i);
  return v;
}

TEST(GpuPlan, DefaultThresholdsAreThePublishedOnes) {
  Tunables t;
  EXPECT_EQ(t.nvswitch.oneShotBelow4, 512 * kKiB);  // vLLM's value
  EXPECT_EQ(t.nvswitch.oneShotBelow8, 256 * kKiB);
  EXPECT_EQ(t.nvswitch.allReduceMaxBytes, 8 * kMiB);  // vLLM's max_size, 1.4
  EXPECT_EQ(t.xgmiMesh.oneShotBelow4, 160 * kKiB);    // aiter, 5.3
  EXPECT_EQ(t.xgmiMesh.oneShotBelow8, 80 * kKiB);
  EXPECT_EQ(t.xgmiMesh.allReduceMaxBytes, 4 * kMiB);  // QuickReduce vs RCCL, 1.7
  EXPECT_EQ(t.xgmiMesh.allPairsMaxBytes, kNoLimit);
  EXPECT_EQ(t.singleGpu.allReduceMaxBytes, kNoLimit);
  EXPECT_EQ(t.gpuForced, GpuForce::kAuto);
}

TEST(GpuPlan, ClassifiesTheFixtureFabrics) {
  topo::Topology h100 = load("hgx_h100_8x_nvswitch.json");
  topo::Topology mi300x = load("mi300x_8x_xgmi.json");
  topo::Topology mi250 = load("mi250_2node_host0.json");
  topo::Topology l40s = load("pcie_4x_l40s.json");
  EXPECT_EQ(classifyFabric(h100, range(8)), GpuFabric::kNvswitch);
  EXPECT_EQ(classifyFabric(h100, {3}), GpuFabric::kSingleGpu);
  EXPECT_EQ(classifyFabric(h100, {3, 3}), GpuFabric::kSingleGpu);
  EXPECT_EQ(classifyFabric(mi300x, range(8)), GpuFabric::kXgmiMesh);
  EXPECT_EQ(classifyFabric(mi300x, {1, 6}), GpuFabric::kXgmiMesh);
  // MI250: the two GCDs of a package, and a pair of packages with 2 links, are meshes; the
  // whole box has pairs joined only through PCIe across sockets.
  EXPECT_EQ(classifyFabric(mi250, {0, 1}), GpuFabric::kXgmiMesh);
  EXPECT_EQ(classifyFabric(mi250, {0, 2}), GpuFabric::kXgmiMesh);
  EXPECT_EQ(classifyFabric(mi250, {0, 1, 2}), GpuFabric::kNoPeerAccess);
  EXPECT_EQ(classifyFabric(mi250, range(8)), GpuFabric::kNoPeerAccess);
  EXPECT_EQ(classifyFabric(l40s, {0, 1}), GpuFabric::kPcieSwitch);
  EXPECT_EQ(classifyFabric(l40s, {2, 3}), GpuFabric::kPcieSwitch);
  EXPECT_EQ(classifyFabric(l40s, {1, 2}), GpuFabric::kNoPeerAccess);
  EXPECT_EQ(classifyFabric(l40s, range(4)), GpuFabric::kNoPeerAccess);
  EXPECT_EQ(testing::errorKindOf([&] { classifyFabric(l40s, {0, 4}); }),
            ErrorKind::kInvalidArgument);
}

// Hand-made machines for the fabrics no fixture has: an NVLink mesh and a mixed one.
TEST(GpuPlan, ClassifiesNvlinkMeshesAndMixedFabrics) {
  topo::Topology t;
  for (int i = 0; i < 4; ++i) {
    topo::Gpu gpu;
    gpu.index = i;
    gpu.vendor = topo::GpuVendor::kNvidia;
    t.gpus.push_back(gpu);
  }
  for (int a = 0; a < 4; ++a) {
    for (int b = a + 1; b < 4; ++b) {
      topo::GpuLink link;
      link.gpuA = a;
      link.gpuB = b;
      link.type = topo::LinkType::kNvlink;
      link.count = 4;
      link.bandwidthGBps = 100;
      t.gpuLinks.push_back(link);
    }
  }
  EXPECT_EQ(classifyFabric(t, range(4)), GpuFabric::kNvlinkMesh);
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 64 * kKiB, 4), t), "one_shot");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 512 * kKiB, 4), t), "two_shot");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 16 * kMiB, 4), t), "nccl");
  // One pair over a PCIe switch instead: still peer access, but the vendor's rings decide.
  t.gpuLinks[5].type = topo::LinkType::kPcie;
  t.gpuLinks[5].pciPath = topo::PciPath::kPix;
  EXPECT_EQ(classifyFabric(t, range(4)), GpuFabric::kMixed);
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 64 * kKiB, 4), t), "nccl");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 64 * kKiB, 4, 2, range(4)), t),
            "one_shot");  // shared GPUs: never delegated
  // Across sockets: no P2P, so no kernel at all.
  t.gpuLinks[5].pciPath = topo::PciPath::kSys;
  EXPECT_EQ(classifyFabric(t, range(4)), GpuFabric::kNoPeerAccess);
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 64 * kKiB, 8, 2, range(4)), t), "host");
}

TEST(GpuPlan, H100NvswitchAllReduce) {
  topo::Topology t = load("hgx_h100_8x_nvswitch.json");
  auto ar = [&](size_t bytes, int world) {
    return nameOf(request(GpuCollective::kAllReduce, bytes, world), t);
  };
  EXPECT_EQ(ar(0, 8), "one_shot");
  expectAllReduceEdges(ar, 256 * kKiB, 8 * kMiB, "nccl");
  EXPECT_EQ(ar(size_t{1} << 30, 8), "nccl");
  EXPECT_EQ(ar(8 * kMiB, 2), "one_shot");  // 2 ranks: one-shot up to the delegation limit
  EXPECT_EQ(ar(8 * kMiB + 1, 2), "nccl");
  EXPECT_EQ(ar(1 * kMiB, 1), "local");  // one rank: nothing to exchange

  GpuPlan plan = planGpu(request(GpuCollective::kAllReduce, 64 * kKiB, 8), t, {});
  EXPECT_EQ(plan.route, GpuRoute::kKernel);
  EXPECT_EQ(plan.kernel, GpuKernel::kOneShotAllReduce);
  EXPECT_EQ(plan.fabric, GpuFabric::kNvswitch);
  EXPECT_NE(plan.reason.find("256 KiB"), std::string::npos) << plan.reason;
  plan = planGpu(request(GpuCollective::kAllReduce, 64 * kMiB, 8), t, {});
  EXPECT_EQ(plan.route, GpuRoute::kVendor);
  EXPECT_EQ(plan.kernel, GpuKernel::kNone);
  EXPECT_NE(plan.reason.find("64 MiB > 8 MiB"), std::string::npos) << plan.reason;
}

TEST(GpuPlan, H100NvswitchOtherCollectives) {
  topo::Topology t = load("hgx_h100_8x_nvswitch.json");
  for (GpuCollective c :
       {GpuCollective::kAllGather, GpuCollective::kReduceScatter, GpuCollective::kAllToAll}) {
    EXPECT_EQ(nameOf(request(c, 1 * kMiB, 8), t), "all_pairs") << gpuCollectiveName(c);
    EXPECT_EQ(nameOf(request(c, 8 * kMiB, 8), t), "all_pairs") << gpuCollectiveName(c);
    EXPECT_EQ(nameOf(request(c, 8 * kMiB + 1, 8), t), "nccl") << gpuCollectiveName(c);
  }
  EXPECT_EQ(nameOf(request(GpuCollective::kBroadcast, 1 * kMiB, 8), t), "broadcast");
  EXPECT_EQ(nameOf(request(GpuCollective::kBroadcast, 1 * kMiB + 1, 8), t), "nccl");
  EXPECT_EQ(nameOf(request(GpuCollective::kReduce, 1 * kKiB, 8), t), "nccl");
  GpuRequest uneven = request(GpuCollective::kAllToAll, 1 * kKiB, 8);
  uneven.evenSplits = false;
  EXPECT_EQ(nameOf(uneven, t), "nccl");
}

TEST(GpuPlan, Mi300xXgmiMesh) {
  topo::Topology t = load("mi300x_8x_xgmi.json");
  auto ar = [&](size_t bytes, int world) {
    return nameOf(request(GpuCollective::kAllReduce, bytes, world, 1, range(world)), t);
  };
  expectAllReduceEdges(ar, 80 * kKiB, 4 * kMiB, "rccl");
  // All-pairs at every size the workspace holds: it drives all seven links, RCCL's rings do
  // not. A per-rank input past the workspace (one launch) goes to RCCL.
  Tunables unlimited;
  unlimited.gpuWorkspaceBytes = kNoLimit;
  for (GpuCollective c :
       {GpuCollective::kAllGather, GpuCollective::kReduceScatter, GpuCollective::kAllToAll}) {
    for (size_t bytes : {size_t{0}, 64 * kKiB, 64 * kMiB, size_t{1} << 34}) {
      GpuPlan plan = planGpu(request(c, bytes, 8), t, unlimited);
      EXPECT_EQ(plan.name, "all_pairs") << gpuCollectiveName(c) << " " << bytes;
      EXPECT_EQ(plan.fabric, GpuFabric::kXgmiMesh);
    }
    EXPECT_EQ(planGpu(request(c, 32 * kMiB, 8), t, {}).name, "all_pairs");
    EXPECT_EQ(planGpu(request(c, 64 * kMiB, 8), t, {}).name,
              c == GpuCollective::kAllGather ? "all_pairs" : "rccl")
        << "all_gather's input is 1/8 of its 64 MiB output; the others' input is 64 MiB";
  }
  EXPECT_EQ(nameOf(request(GpuCollective::kAllGather, 1 * kMiB, 4, 1, {0, 2, 5, 7}), t),
            "all_pairs");
  EXPECT_EQ(nameOf(request(GpuCollective::kBroadcast, 1 * kMiB, 8), t), "broadcast");
  EXPECT_EQ(nameOf(request(GpuCollective::kReduce, 1 * kKiB, 8), t), "rccl");
}

TEST(GpuPlan, Mi250TwoNodes) {
  for (const char* host : {"mi250_2node_host0.json", "mi250_2node_host1.json"}) {
    topo::Topology t = load(host);
    for (GpuCollective c : kCollectives) {
      GpuPlan plan = planGpu(request(c, 64 * kKiB, 16, 1, {}, 2), t, {});
      EXPECT_EQ(plan.route, GpuRoute::kVendor) << host << " " << gpuCollectiveName(c);
      EXPECT_EQ(plan.name, "rccl");
      // Several ranks per GCD across hosts: NCCL/RCCL refuse, no kernel spans hosts.
      plan = planGpu(request(c, 64 * kKiB, 32, 2, {}, 2), t, {});
      EXPECT_EQ(plan.route, GpuRoute::kHost) << host << " " << gpuCollectiveName(c);
    }
    // One host, the whole box: some GCD pairs only meet through PCIe across sockets.
    EXPECT_EQ(nameOf(request(GpuCollective::kAllGather, 64 * kKiB, 8), t), "rccl");
    // The two GCDs of one package: a 4-link xGMI pair.
    EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 1 * kMiB, 2, 1, {6, 7}), t), "one_shot");
    EXPECT_EQ(nameOf(request(GpuCollective::kAllGather, 64 * kMiB, 2, 1, {6, 7}), t), "all_pairs");
  }
}

TEST(GpuPlan, PcieBoxWithoutNvlink) {
  topo::Topology t = load("pcie_4x_l40s.json");
  // The whole box: pairs across sockets, no P2P assumed.
  expectPlan(request(GpuCollective::kAllReduce, 4 * kKiB, 4), t, "nccl", GpuFabric::kNoPeerAccess);
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 4 * kKiB, 2), t), "nccl");  // gpus unknown
  // Two GPUs under one switch: kernels for small messages.
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 64 * kKiB, 2, 1, {0, 1}), t), "one_shot");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 1 * kMiB, 2, 1, {2, 3}), t), "one_shot");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 1 * kMiB + 1, 2, 1, {2, 3}), t), "nccl");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllGather, 64 * kKiB, 2, 1, {0, 1}), t), "all_pairs");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 64 * kKiB, 2, 1, {1, 2}), t), "nccl");
  // Ranks sharing GPUs: a kernel when the GPUs have P2P, host memory when they have none.
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 64 * kMiB, 4, 4, {1}), t), "two_shot");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 64 * kMiB, 4, 4), t), "two_shot");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 64 * kMiB, 4, 2, {0, 1}), t), "two_shot");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 64 * kKiB, 4, 2, {0, 2}), t), "host");
}

TEST(GpuPlan, CpuVmKnowsNoGpus) {
  topo::Topology t = load("cpu_vm.json");
  expectPlan(request(GpuCollective::kAllReduce, 4 * kKiB, 2), t, "nccl", GpuFabric::kUnknown);
  // All ranks on one GPU needs no topology.
  expectPlan(request(GpuCollective::kAllReduce, 4 * kKiB, 2, 2), t, "one_shot",
             GpuFabric::kSingleGpu);
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 4 * kKiB, 4, 2), t), "host");
}

TEST(GpuPlan, DtypesAndOpsWithoutAKernel) {
  topo::Topology t = load("hgx_h100_8x_nvswitch.json");
  GpuRequest r = request(GpuCollective::kAllReduce, 4 * kKiB, 8);
  r.dtype = DataType::kInt32;
  EXPECT_EQ(nameOf(r, t), "nccl");
  r.ranksPerGpu = 2;
  r.worldSize = 4;
  EXPECT_EQ(nameOf(r, t), "host");
  r = request(GpuCollective::kReduceScatter, 4 * kKiB, 8);
  r.op = ReduceOp::kProduct;
  EXPECT_EQ(nameOf(r, t), "nccl");
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kPreMulSum, ReduceOp::kMin, ReduceOp::kMax}) {
    r.op = op;
    EXPECT_EQ(nameOf(r, t), "all_pairs") << reduceOpName(op);
  }
  // Copies take every dtype, and their op is irrelevant.
  r = request(GpuCollective::kAllGather, 4 * kKiB, 8);
  r.dtype = DataType::kInt64;
  r.op = ReduceOp::kBxor;
  EXPECT_EQ(nameOf(r, t), "all_pairs");
}

TEST(GpuPlan, TooManyRanksForTheKernels) {
  topo::Topology t = load("hgx_h100_8x_nvswitch.json");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 4 * kKiB, 16, 2), t), "host");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 4 * kKiB, 8, 2, range(4)), t), "one_shot");
}

// The rule NCCL imposes: with ranks sharing a GPU nothing is delegated (without a force).
TEST(GpuPlan, SharedGpusAreNeverDelegated) {
  for (const std::string& name : kFixtures) {
    topo::Topology t = load(name);
    for (GpuCollective c : kCollectives) {
      for (int world : {2, 3, 4, 8, 16}) {
        for (int perGpu : {2, world}) {
          if (perGpu > world) continue;
          for (int hosts : {1, 2}) {
            for (size_t bytes : {size_t{0}, 4 * kKiB, 64 * kMiB, size_t{1} << 40}) {
              GpuPlan plan = planGpu(request(c, bytes, world, perGpu, {}, hosts), t, {});
              EXPECT_NE(plan.route, GpuRoute::kVendor)
                  << name << " " << gpuCollectiveName(c) << " world " << world << " perGpu "
                  << perGpu << " hosts " << hosts << " bytes " << bytes << ": " << plan.reason;
            }
          }
        }
      }
    }
  }
}

// Over every fixture, collective, world size and size: invariants of any plan, and sizes only
// ever move one way (one-shot -> two-shot -> vendor).
TEST(GpuPlan, GridProperties) {
  std::vector<size_t> sizes = {0, 1, 4 * kKiB};
  for (size_t s = 64 * kKiB; s <= (size_t{1} << 32); s *= 2) {
    sizes.push_back(s - 1);
    sizes.push_back(s);
    sizes.push_back(s + 1);
  }
  sizes.push_back(SIZE_MAX);
  for (const std::string& name : kFixtures) {
    topo::Topology t = load(name);
    for (GpuCollective c : kCollectives) {
      for (int world : {1, 2, 3, 4, 5, 8, 9, 16}) {
        for (int hosts : {1, 2}) {
          if (hosts > world) continue;
          for (int perGpu : {1, 2}) {
            if (perGpu > world) continue;
            bool delegated = false;
            bool twoShot = false;
            for (size_t bytes : sizes) {
              GpuRequest r = request(c, bytes, world, perGpu, {}, hosts);
              GpuPlan plan = planGpu(r, t, {});
              std::string where =
                  name + " " + gpuCollectiveName(c) + " world " + std::to_string(world) +
                  " hosts " + std::to_string(hosts) + " perGpu " + std::to_string(perGpu) +
                  " bytes " + std::to_string(bytes) + ": " + plan.name + " (" + plan.reason + ")";
              EXPECT_FALSE(plan.reason.empty()) << where;
              EXPECT_FALSE(plan.name.empty()) << where;
              EXPECT_EQ(plan.route == GpuRoute::kKernel, plan.kernel != GpuKernel::kNone) << where;
              if (hosts > 1 || world > 8 || c == GpuCollective::kReduce) {
                EXPECT_NE(plan.route, GpuRoute::kKernel) << where;
              }
              if (plan.route == GpuRoute::kHost) {
                EXPECT_GT(perGpu, 1) << where;
              }
              if (plan.route == GpuRoute::kKernel) {
                const bool allReduceKernel = plan.kernel == GpuKernel::kOneShotAllReduce ||
                                             plan.kernel == GpuKernel::kTwoShotAllReduce;
                EXPECT_EQ(allReduceKernel, c == GpuCollective::kAllReduce) << where;
              }
              // Monotonic in size: once delegated, larger messages stay delegated; once
              // two-shot, larger messages never go back to one-shot.
              if (delegated) {
                EXPECT_EQ(plan.route, GpuRoute::kVendor) << where;
              }
              if (twoShot) {
                EXPECT_NE(plan.kernel, GpuKernel::kOneShotAllReduce) << where;
              }
              delegated = delegated || plan.route == GpuRoute::kVendor;
              twoShot = twoShot || plan.kernel == GpuKernel::kTwoShotAllReduce;
              // Deterministic: every rank computes the same plan from the same inputs.
              EXPECT_EQ(planGpu(r, t, {}).name, plan.name) << where;
            }
          }
        }
      }
    }
  }
}

TEST(GpuPlan, ForcingByName) {
  EXPECT_EQ(parseGpuForce(""), GpuForce::kAuto);
  EXPECT_EQ(parseGpuForce("auto"), GpuForce::kAuto);
  EXPECT_EQ(parseGpuForce("nccl"), GpuForce::kVendor);
  EXPECT_EQ(parseGpuForce("rccl"), GpuForce::kVendor);
  EXPECT_EQ(parseGpuForce("vendor"), GpuForce::kVendor);
  EXPECT_EQ(parseGpuForce("kernel"), GpuForce::kKernel);
  EXPECT_EQ(parseGpuForce("one_shot"), GpuForce::kOneShot);
  EXPECT_EQ(parseGpuForce("two_shot"), GpuForce::kTwoShot);
  EXPECT_EQ(parseGpuForce("all_pairs"), GpuForce::kAllPairs);
  for (GpuForce f : {GpuForce::kAuto, GpuForce::kVendor, GpuForce::kKernel, GpuForce::kOneShot,
                     GpuForce::kTwoShot, GpuForce::kAllPairs}) {
    EXPECT_EQ(parseGpuForce(gpuForceName(f)), f);
  }
  EXPECT_EQ(testing::errorKindOf([] { parseGpuForce("ring"); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(testing::errorKindOf([] { parseGpuForce("ONE_SHOT"); }), ErrorKind::kInvalidArgument);
}

TEST(GpuPlan, ForcedChoices) {
  topo::Topology h100 = load("hgx_h100_8x_nvswitch.json");
  topo::Topology l40s = load("pcie_4x_l40s.json");
  Tunables t;
  t.gpuForced = GpuForce::kVendor;
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 4 * kKiB, 8), h100, t), "nccl");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 4 * kKiB, 4, 2), h100, t), "nccl");

  t.gpuForced = GpuForce::kKernel;  // past the size and fabric limits, not past impossibility
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, size_t{1} << 30, 8), h100, t), "two_shot");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 64 * kKiB, 8), h100, t), "one_shot");
  EXPECT_EQ(nameOf(request(GpuCollective::kBroadcast, size_t{1} << 30, 8), h100, t), "broadcast");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 8 * kMiB, 4, 1, range(4)), l40s, t), "nccl");
  GpuPlan plan = planGpu(request(GpuCollective::kAllReduce, 4 * kKiB, 16, 1, {}, 2), h100, t);
  EXPECT_EQ(plan.name, "nccl");
  EXPECT_NE(plan.reason.find("cannot run here"), std::string::npos) << plan.reason;
  EXPECT_EQ(nameOf(request(GpuCollective::kReduce, 4 * kKiB, 8), h100, t), "nccl");

  t.gpuForced = GpuForce::kOneShot;
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, size_t{1} << 30, 8), h100, t), "one_shot");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllGather, size_t{1} << 30, 8), h100, t), "nccl");
  t.gpuForced = GpuForce::kTwoShot;
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 1 * kKiB, 2), h100, t), "two_shot");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, 1 * kKiB, 4, 4), h100, t), "two_shot");
  t.gpuForced = GpuForce::kAllPairs;
  EXPECT_EQ(nameOf(request(GpuCollective::kAllToAll, size_t{1} << 30, 8), h100, t), "nccl")
      << "1 GiB per rank is past the workspace, which forcing cannot enlarge";
  t.gpuWorkspaceBytes = kNoLimit;
  EXPECT_EQ(nameOf(request(GpuCollective::kAllToAll, size_t{1} << 30, 8), h100, t), "all_pairs");
  EXPECT_EQ(nameOf(request(GpuCollective::kAllReduce, size_t{1} << 30, 8), h100, t), "nccl");
}

TEST(GpuPlan, ForcedFromTheEnvironment) {
  // Safe to set here: XCCL_* values are cached per process and only this test reads this one.
  ::setenv("XCCL_GPU_ALGO", "two_shot", 1);
  EXPECT_EQ(Tunables::fromEnvironment().gpuForced, GpuForce::kTwoShot);
}

TEST(GpuPlan, RejectsMalformedRequests) {
  topo::Topology t = load("hgx_h100_8x_nvswitch.json");
  auto plan = [&](GpuRequest r) { return [&t, r] { planGpu(r, t, {}); }; };
  EXPECT_EQ(testing::errorKindOf(plan(request(GpuCollective::kAllReduce, 1, 0))),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(testing::errorKindOf(plan(request(GpuCollective::kAllReduce, 1, 2, 0))),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(testing::errorKindOf(plan(request(GpuCollective::kAllReduce, 1, 2, 3))),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(testing::errorKindOf(plan(request(GpuCollective::kAllReduce, 1, 2, 1, {}, 3))),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(testing::errorKindOf(plan(request(GpuCollective::kAllReduce, 1, 2, 1, {0, 8}))),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(testing::errorKindOf(plan(request(GpuCollective::kAllReduce, 1, 4, 1, {0, 1}))),
            ErrorKind::kInvalidArgument);  // 4 ranks on 2 GPUs with one rank per GPU
}

}  // namespace
}  // namespace xccl::algo
