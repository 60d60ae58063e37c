// planCpu (cpu_plan.h) as a table: request, group shape and tunables -> the whole plan (route,
// algorithm, the in-host algorithm of hierarchical all_reduce, ring chunking).
#include <cstdint>
#include <sstream>

#include "algo/cpu_plan.h"
#include "algo_testing.h"

namespace xccl {
namespace {

using algo::Algorithm;
using algo::Collective;
using algo::CpuRoute;
using algo::Locality;

constexpr size_t kKiB = 1024, kMiB = 1024 * 1024;

struct Row {
  Collective collective;
  size_t bytes;
  algo::GroupShape shape;
  Algorithm forced;
  size_t shmTwoShotMinBytes;  // the tunable; the others keep their defaults
  // Expected:
  CpuRoute route;
  Algorithm algorithm;
  Algorithm hostAlgorithm;
  size_t ringChunkBytes;
};

const algo::GroupShape kNet4{4}, kNet2{2}, kShm2{2, Locality::kOneHost, 1, 2},
    kShm4{4, Locality::kOneHost, 1, 4}, kShm8{8, Locality::kOneHost, 1, 8},
    kTwoHostsOf4{8, Locality::kPerHost, 2, 4}, kFourHostsOf2{8, Locality::kPerHost, 4, 2};
constexpr Algorithm kAuto = Algorithm::kAuto;
constexpr size_t kDefault2MiB = 2 * kMiB;

const Row kRows[] = {
    // TCP: direct up to 64 KiB per rank, ring (512 KiB chunks) above; with 2 ranks direct but
    // all_reduce.
    {Collective::kAllReduce, 64 * kKiB, kNet4, kAuto, kDefault2MiB, CpuRoute::kNet,
     Algorithm::kDirect, Algorithm::kShm, 0},
    {Collective::kAllReduce, 64 * kKiB + 1, kNet4, kAuto, kDefault2MiB, CpuRoute::kNet,
     Algorithm::kRing, Algorithm::kShm, 512 * kKiB},
    {Collective::kAllReduce, 1 * kMiB, kNet2, kAuto, kDefault2MiB, CpuRoute::kNet, Algorithm::kRing,
     Algorithm::kShm, 512 * kKiB},
    {Collective::kBroadcast, 1 * kMiB, kNet2, kAuto, kDefault2MiB, CpuRoute::kNet,
     Algorithm::kDirect, Algorithm::kShm, 0},
    {Collective::kAllGather, 1 * kMiB, kNet4, kAuto, kDefault2MiB, CpuRoute::kNet, Algorithm::kRing,
     Algorithm::kShm, 512 * kKiB},
    {Collective::kAllToAll, 64 * kMiB, kNet4, kAuto, kDefault2MiB, CpuRoute::kNet,
     Algorithm::kDirect, Algorithm::kShm, 0},
    {Collective::kBarrier, 0, kNet4, Algorithm::kRing, kDefault2MiB, CpuRoute::kNet,
     Algorithm::kDirect, Algorithm::kShm, 0},
    // One host: shared memory; all_reduce and reduce two-shot from the scaled threshold (4 ranks:
    // 2 MiB; 8 ranks: 2 MiB x 1.75 / 5.875 = 624 KiB and a bit; 2 ranks: never).
    {Collective::kAllReduce, 2 * kMiB - 1, kShm4, kAuto, kDefault2MiB, CpuRoute::kShm,
     Algorithm::kOneShot, Algorithm::kShm, 0},
    {Collective::kAllReduce, 2 * kMiB, kShm4, kAuto, kDefault2MiB, CpuRoute::kShm,
     Algorithm::kTwoShot, Algorithm::kShm, 0},
    {Collective::kReduce, 1 * kMiB, kShm8, kAuto, kDefault2MiB, CpuRoute::kShm, Algorithm::kTwoShot,
     Algorithm::kShm, 0},
    {Collective::kAllReduce, 512 * kKiB, kShm8, kAuto, kDefault2MiB, CpuRoute::kShm,
     Algorithm::kOneShot, Algorithm::kShm, 0},
    {Collective::kAllReduce, 1ull << 40, kShm2, kAuto, kDefault2MiB, CpuRoute::kShm,
     Algorithm::kOneShot, Algorithm::kShm, 0},
    {Collective::kAllReduce, 8, kShm2, kAuto, 0, CpuRoute::kShm, Algorithm::kTwoShot,
     Algorithm::kShm, 0},
    {Collective::kAllReduce, 1ull << 40, kShm8, kAuto, SIZE_MAX, CpuRoute::kShm,
     Algorithm::kOneShot, Algorithm::kShm, 0},
    {Collective::kAllGather, 64 * kMiB, kShm4, kAuto, kDefault2MiB, CpuRoute::kShm, Algorithm::kShm,
     Algorithm::kShm, 0},
    {Collective::kAllReduce, 64 * kMiB, kShm4, Algorithm::kShm, kDefault2MiB, CpuRoute::kShm,
     Algorithm::kTwoShot, Algorithm::kShm, 0},
    // Forcing a TCP algorithm wins over shared memory.
    {Collective::kAllReduce, 8, kShm4, Algorithm::kRing, kDefault2MiB, CpuRoute::kNet,
     Algorithm::kRing, Algorithm::kShm, 512 * kKiB},
    {Collective::kScatter, 8, kShm4, Algorithm::kRing, kDefault2MiB, CpuRoute::kShm,
     Algorithm::kShm, Algorithm::kShm, 0},
    // Hosts with several ranks: all_reduce hierarchical in ring chunks, the leaders' TCP
    // algorithm (hosts of different sizes) planned for H ranks, the in-host reduce for this
    // host's ranks; the other collectives hierarchical too,
    // pipelined in ring chunks (broadcast and reduce as a chain, the rest direct).
    {Collective::kAllReduce, 8, kTwoHostsOf4, kAuto, kDefault2MiB, CpuRoute::kHierarchical,
     Algorithm::kDirect, Algorithm::kOneShot, 512 * kKiB},
    {Collective::kAllReduce, 4 * kMiB, kTwoHostsOf4, kAuto, kDefault2MiB, CpuRoute::kHierarchical,
     Algorithm::kRing, Algorithm::kTwoShot, 512 * kKiB},
    {Collective::kAllReduce, 4 * kMiB, kFourHostsOf2, kAuto, kDefault2MiB, CpuRoute::kHierarchical,
     Algorithm::kRing, Algorithm::kOneShot, 512 * kKiB},
    {Collective::kAllGather, 8, kTwoHostsOf4, kAuto, kDefault2MiB, CpuRoute::kHierarchical,
     Algorithm::kDirect, Algorithm::kShm, 512 * kKiB},
    {Collective::kBroadcast, 64 * kMiB, kTwoHostsOf4, kAuto, kDefault2MiB, CpuRoute::kHierarchical,
     Algorithm::kRing, Algorithm::kShm, 512 * kKiB},
    {Collective::kReduce, 64 * kMiB, kTwoHostsOf4, kAuto, kDefault2MiB, CpuRoute::kHierarchical,
     Algorithm::kRing, Algorithm::kOneShot, 512 * kKiB},
    {Collective::kReduceScatter, 64 * kMiB, kTwoHostsOf4, kAuto, 0, CpuRoute::kHierarchical,
     Algorithm::kDirect, Algorithm::kTwoShot, 512 * kKiB},
    {Collective::kAllToAll, 0, kTwoHostsOf4, kAuto, kDefault2MiB, CpuRoute::kHierarchical,
     Algorithm::kDirect, Algorithm::kShm, 0},
    {Collective::kBarrier, 0, kFourHostsOf2, kAuto, kDefault2MiB, CpuRoute::kHierarchical,
     Algorithm::kDirect, Algorithm::kShm, 0},
    {Collective::kScatter, 8, kTwoHostsOf4, Algorithm::kRing, kDefault2MiB, CpuRoute::kHierarchical,
     Algorithm::kDirect, Algorithm::kShm, 512 * kKiB},
    {Collective::kAllReduce, 4 * kMiB, kTwoHostsOf4, Algorithm::kDirect, kDefault2MiB,
     CpuRoute::kNet, Algorithm::kDirect, Algorithm::kShm, 0},
};

TEST(CpuPlanTable, EveryRow) {
  for (const Row& row : kRows) {
    algo::Tunables t;
    t.forced = row.forced;
    t.shmTwoShotMinBytes = row.shmTwoShotMinBytes;
    const algo::CpuPlan plan = algo::planCpu({row.collective, row.bytes}, row.shape, t);
    std::ostringstream where;
    where << algo::collectiveName(row.collective) << " " << row.bytes << " B, world "
          << row.shape.worldSize << ", locality " << static_cast<int>(row.shape.locality)
          << ", forced " << algo::algorithmName(row.forced);
    EXPECT_EQ(plan.route, row.route) << where.str() << ": " << algo::cpuRouteName(plan.route);
    EXPECT_EQ(plan.algorithm, row.algorithm)
        << where.str() << ": " << algo::algorithmName(plan.algorithm);
    if (row.route == CpuRoute::kHierarchical) {
      EXPECT_EQ(plan.hostAlgorithm, row.hostAlgorithm)
          << where.str() << ": " << algo::algorithmName(plan.hostAlgorithm);
    }
    EXPECT_EQ(plan.ringChunkBytes, row.ringChunkBytes) << where.str();
    EXPECT_NE(std::string(plan.reason), "") << where.str();
  }
}

TEST(CpuPlanTable, ShmTwoShotThresholdScalesWithTheTrafficItSaves) {
  algo::Tunables t;
  EXPECT_EQ(algo::shmTwoShotThreshold(4, t), algo::kShmTwoShotMinBytes);
  EXPECT_EQ(algo::shmTwoShotThreshold(2, t), SIZE_MAX);
  const size_t eight = algo::shmTwoShotThreshold(8, t);
  EXPECT_NEAR(static_cast<double>(eight) / algo::kShmTwoShotMinBytes, 1.75 / (6 - 1.0 / 8), 1e-6);
  // The table's 8-rank rows sit on either side of it.
  EXPECT_GT(eight, 512 * kKiB);
  EXPECT_LT(eight, 1 * kMiB);
}

TEST(CpuPlanTable, OneTunablesFromTheEnvironment) {
  for (const char* var : {"XCCL_ALGO", "XCCL_SMALL_MSG_BYTES", "XCCL_RING_CHUNK_BYTES",
                          "XCCL_SHM_TWO_SHOT_BYTES", "XCCL_GPU_ALGO", "XCCL_GPU_WORKSPACE_BYTES"}) {
    if (const char* value = std::getenv(var); value != nullptr && *value != '\0') {
      GTEST_SKIP() << var << " is set in the environment";
    }
  }
  const algo::Tunables fromEnv = algo::Tunables::fromEnvironment(), defaults;
  EXPECT_EQ(fromEnv.shmTwoShotMinBytes, defaults.shmTwoShotMinBytes);
  EXPECT_EQ(fromEnv.gpuWorkspaceBytes, defaults.gpuWorkspaceBytes);
  EXPECT_EQ(fromEnv.gpuWorkspaceBytes, 32 * kMiB);
  EXPECT_EQ(fromEnv.gpuForced, algo::GpuForce::kAuto);
  EXPECT_EQ(fromEnv.smallMessageBytes, defaults.smallMessageBytes);
}

}  // namespace
}  // namespace xccl
