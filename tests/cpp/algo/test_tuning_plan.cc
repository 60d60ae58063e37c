// planCpu and planGpu with a tuning table (algo/tuning.h) against the same calls without one,
// over a grid of sizes: an entry changes exactly the requests its range covers, a forced
// algorithm wins over it, and a route the group cannot run falls back to the rules.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algo/cpu_plan.h"
#include "algo/gpu_plan.h"
#include "algo/tuning.h"

namespace xccl::algo {
namespace {

std::vector<size_t> grid() {
  std::vector<size_t> sizes{0, 1, 7};
  for (size_t s = 64; s <= 256 * kMiB; s *= 4) {
    sizes.push_back(s - 1);
    sizes.push_back(s);
  }
  return sizes;
}

void expectSamePlan(const CpuPlan& a, const CpuPlan& b, const std::string& where) {
  EXPECT_EQ(a.route, b.route) << where;
  EXPECT_EQ(a.algorithm, b.algorithm) << where;
  EXPECT_EQ(a.hostAlgorithm, b.hostAlgorithm) << where;
  EXPECT_EQ(a.ringChunkBytes, b.ringChunkBytes) << where;
  EXPECT_STREQ(a.reason, b.reason) << where;
  EXPECT_EQ(b.tuned, nullptr) << where;
}

TEST(TunedCpuPlan, AnEntryChangesExactlyItsRange) {
  const GroupShape oneHost{4, Locality::kOneHost, 1, 4};
  // all_reduce messages 64 KiB..1 MiB two-shot (the rules: one-shot below 2 MiB at 4 ranks);
  // all_gather messages from 1 MiB over TCP rings of 64 KiB chunks.
  const TuningTable t = parseTuningTable("xccl-tuning 1\nworld 4 1 one_host\n"
                                         "cpu all_reduce 65536 1048576 shm two_shot 0 10 20\n"
                                         "cpu all_gather 1048576 inf tcp ring 65536 30 40\n");
  const Tunables tunables;
  int tunedCount = 0;
  for (Collective c : kCpuCollectives) {
    for (size_t bytes : grid()) {
      const std::string where = std::string(collectiveName(c)) + " " + std::to_string(bytes);
      const CpuPlan rule = planCpu({c, bytes}, oneHost, tunables);
      const CpuPlan tuned = planCpu({c, bytes}, oneHost, tunables, &t);
      const size_t message = c == Collective::kAllGather ? bytes * 4 : bytes;
      if (c == Collective::kAllReduce && message >= 65536 && message < 1048576) {
        ++tunedCount;
        EXPECT_EQ(tuned.tuned, &t.cpu[0]) << where;
        EXPECT_EQ(tuned.route, CpuRoute::kShm) << where;
        EXPECT_EQ(tuned.algorithm, Algorithm::kTwoShot) << where;
        EXPECT_EQ(rule.algorithm, Algorithm::kOneShot) << where;
        EXPECT_NE(std::string(tuned.reason).find("tuned"), std::string::npos) << where;
      } else if (c == Collective::kAllGather && message >= 1048576) {
        ++tunedCount;
        EXPECT_EQ(tuned.tuned, &t.cpu[1]) << where;
        EXPECT_EQ(tuned.route, CpuRoute::kNet) << where;
        EXPECT_EQ(tuned.algorithm, Algorithm::kRing) << where;
        EXPECT_EQ(tuned.ringChunkBytes, 65536u) << where;
      } else {
        expectSamePlan(rule, tuned, where);
      }
    }
  }
  EXPECT_EQ(tunedCount, 4 + 11) << "the grid reaches both ranges";
}

TEST(TunedCpuPlan, AForcedAlgorithmWins) {
  const TuningTable t = parseTuningTable(
      "xccl-tuning 1\nworld 4 1 one_host\ncpu all_reduce 0 inf shm two_shot 0 1 2\n");
  Tunables forced;
  forced.forced = Algorithm::kRing;
  for (size_t bytes : grid()) {
    const CpuPlan plan =
        planCpu({Collective::kAllReduce, bytes}, {4, Locality::kOneHost, 1, 4}, forced, &t);
    EXPECT_EQ(plan.route, CpuRoute::kNet);
    EXPECT_EQ(plan.algorithm, Algorithm::kRing);
    EXPECT_EQ(plan.tuned, nullptr);
  }
}

TEST(TunedCpuPlan, ARouteTheGroupCannotRunFallsBackToTheRules) {
  const TuningTable t = parseTuningTable("xccl-tuning 1\nworld 4 2 per_host\n"
                                         "cpu all_reduce 0 inf shm two_shot 0 1 2\n"
                                         "cpu broadcast 0 inf hierarchical ring 8192 1 2\n"
                                         "cpu reduce 0 inf tcp ring 0 1 2\n");
  const Tunables tunables;
  const GroupShape shapes[] = {{4, Locality::kNone, 1, 1},
                               {4, Locality::kOneHost, 1, 4},
                               {4, Locality::kPerHost, 2, 2}};
  for (const GroupShape& shape : shapes) {
    for (size_t bytes : grid()) {
      const std::string where =
          std::string(localityName(shape.locality)) + " " + std::to_string(bytes);
      const CpuPlan ar = planCpu({Collective::kAllReduce, bytes}, shape, tunables, &t);
      if (shape.locality == Locality::kOneHost) {
        EXPECT_EQ(ar.tuned, &t.cpu[0]) << where;
      } else {
        expectSamePlan(planCpu({Collective::kAllReduce, bytes}, shape, tunables), ar, where);
      }
      const CpuPlan bc = planCpu({Collective::kBroadcast, bytes}, shape, tunables, &t);
      if (shape.locality == Locality::kPerHost) {
        EXPECT_EQ(bc.tuned, &t.cpu[1]) << where;
        EXPECT_EQ(bc.route, CpuRoute::kHierarchical) << where;
        EXPECT_EQ(bc.ringChunkBytes, 8192u) << where;
      } else {
        expectSamePlan(planCpu({Collective::kBroadcast, bytes}, shape, tunables), bc, where);
      }
      // TCP runs everywhere: the default chunk where the entry leaves it 0.
      const CpuPlan rd = planCpu({Collective::kReduce, bytes}, shape, tunables, &t);
      EXPECT_EQ(rd.tuned, &t.cpu[2]) << where;
      EXPECT_EQ(rd.route, CpuRoute::kNet) << where;
      EXPECT_EQ(rd.ringChunkBytes, tunables.ringChunkBytes) << where;
    }
  }
}

TEST(TunedCpuPlan, HierarchicalEntriesSetTheInHostReduction) {
  const TuningTable t =
      parseTuningTable("xccl-tuning 1\nworld 8 2 per_host\n"
                       "cpu reduce_scatter 0 inf hierarchical one_shot 1048576 1 2\n");
  Tunables tunables;
  tunables.shmTwoShotMinBytes = 0;  // the rules: two-shot everywhere
  const GroupShape shape{8, Locality::kPerHost, 2, 4};
  const CpuPlan rule = planCpu({Collective::kReduceScatter, kMiB}, shape, tunables);
  const CpuPlan tuned = planCpu({Collective::kReduceScatter, kMiB}, shape, tunables, &t);
  EXPECT_EQ(rule.hostAlgorithm, Algorithm::kTwoShot);
  EXPECT_EQ(tuned.hostAlgorithm, Algorithm::kOneShot);
  EXPECT_EQ(tuned.algorithm, rule.algorithm);
  EXPECT_EQ(tuned.ringChunkBytes, kMiB);
  EXPECT_EQ(rule.ringChunkBytes, tunables.ringChunkBytes);
}

topo::Topology h100() {
  return topo::loadTopologyFile(std::string(XCCL_TOPO_FIXTURE_DIR) + "/hgx_h100_8x_nvswitch.json");
}

GpuRequest gpuRequest(GpuCollective c, size_t bytes) {
  GpuRequest r;
  r.collective = c;
  r.bytes = bytes;
  r.dtype = DataType::kBFloat16;
  r.worldSize = 4;
  r.gpus = {0, 1, 2, 3};
  r.kernelsVerified = true;
  return r;
}

const char kGpuTable[] = "xccl-tuning 1\nworld 4 1 one_host\n"
                         "gpu all_reduce 0 65536 kernel two_shot 1 2\n"
                         "gpu all_reduce 65536 4194304 vendor none 3 4\n"
                         "gpu broadcast 8388608 inf kernel broadcast 5 6\n";

TEST(TunedGpuPlan, AnEntryChangesExactlyItsRange) {
  const topo::Topology machine = h100();
  const TuningTable t = parseTuningTable(kGpuTable);
  const Tunables tunables;
  for (GpuCollective c :
       {GpuCollective::kAllReduce, GpuCollective::kAllGather, GpuCollective::kReduceScatter,
        GpuCollective::kBroadcast, GpuCollective::kReduce, GpuCollective::kAllToAll}) {
    for (size_t bytes : grid()) {
      const std::string where = std::string(gpuCollectiveName(c)) + " " + std::to_string(bytes);
      const GpuPlan rule = planGpu(gpuRequest(c, bytes), machine, tunables);
      const GpuPlan tuned = planGpu(gpuRequest(c, bytes), machine, tunables, &t);
      if (c == GpuCollective::kAllReduce && bytes < 65536) {
        EXPECT_EQ(tuned.tuned, &t.gpu[0]) << where;
        EXPECT_EQ(tuned.kernel, GpuKernel::kTwoShotAllReduce) << where;
        EXPECT_EQ(rule.kernel, GpuKernel::kOneShotAllReduce) << where;
      } else if (c == GpuCollective::kAllReduce && bytes < 4194304) {
        EXPECT_EQ(tuned.tuned, &t.gpu[1]) << where;
        EXPECT_EQ(tuned.route, GpuRoute::kVendor) << where;
        EXPECT_EQ(tuned.name, "nccl") << where;
      } else if (c == GpuCollective::kBroadcast && bytes >= 8388608) {
        EXPECT_EQ(tuned.tuned, &t.gpu[2]) << where;
        EXPECT_EQ(tuned.route, GpuRoute::kKernel) << where;
        EXPECT_EQ(rule.route, GpuRoute::kVendor) << "beyond the rules' 1 MiB limit: " << where;
      } else {
        EXPECT_EQ(tuned.tuned, nullptr) << where;
        EXPECT_EQ(tuned.route, rule.route) << where;
        EXPECT_EQ(tuned.kernel, rule.kernel) << where;
        EXPECT_EQ(tuned.reason, rule.reason) << where;
      }
    }
  }
}

TEST(TunedGpuPlan, NeverAKernelTheRulesRuleOutNorOverAForcedChoice) {
  const topo::Topology machine = h100();
  const TuningTable t = parseTuningTable(kGpuTable);
  const Tunables tunables;
  auto expectRules = [&](const GpuRequest& r, const Tunables& tun, const char* why) {
    const GpuPlan rule = planGpu(r, machine, tun);
    const GpuPlan tuned = planGpu(r, machine, tun, &t);
    EXPECT_EQ(tuned.tuned, nullptr) << why;
    EXPECT_EQ(tuned.route, rule.route) << why;
    EXPECT_EQ(tuned.kernel, rule.kernel) << why;
  };
  GpuRequest r = gpuRequest(GpuCollective::kAllReduce, 1024);
  r.kernelsVerified = false;
  expectRules(r, tunables, "unverified kernels");
  r = gpuRequest(GpuCollective::kAllReduce, 1024);
  r.dtype = DataType::kInt64;
  expectRules(r, tunables, "no kernel for the dtype");
  r = gpuRequest(GpuCollective::kAllReduce, 1024);
  r.hosts = 2;
  expectRules(r, tunables, "two hosts");
  Tunables forced;
  forced.gpuForced = GpuForce::kOneShot;
  expectRules(gpuRequest(GpuCollective::kAllReduce, 1024), forced, "XCCL_GPU_ALGO=one_shot");
  forced.gpuForced = GpuForce::kVendor;
  expectRules(gpuRequest(GpuCollective::kAllReduce, 1024), forced, "XCCL_GPU_ALGO=nccl");
  // Found out at run time, after the table chose a kernel: the kernel still cannot run.
  r = gpuRequest(GpuCollective::kAllReduce, 1024);
  r.ipcRefused = true;
  EXPECT_EQ(planGpu(r, machine, tunables, &t).route, GpuRoute::kVendor);
  // Ranks sharing a GPU have no vendor route: the vendor entry is not used, the kernel one is.
  r = gpuRequest(GpuCollective::kAllReduce, 128 * kKiB);
  r.worldSize = 4;
  r.ranksPerGpu = 2;
  r.gpus = {0, 1};
  const GpuPlan shared = planGpu(r, machine, tunables, &t);
  EXPECT_EQ(shared.tuned, nullptr);
  EXPECT_EQ(shared.route, GpuRoute::kKernel);
  r.bytes = 1024;
  EXPECT_EQ(planGpu(r, machine, tunables, &t).tuned, &t.gpu[0]);
}

}  // namespace
}  // namespace xccl::algo
