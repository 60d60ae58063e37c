// CPU selection (cpu_plan.h): a pure function, checked over a grid and a table of rows without
// any transport.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iterator>

#include "algo/cpu_plan.h"
#include "algo_testing.h"

namespace xccl {
namespace {

using algo::Algorithm;
using algo::Collective;
using testing::throwsError;

// The collectives that have a ring (and a direct) TCP algorithm.
constexpr Collective kCollectives[] = {Collective::kAllReduce, Collective::kAllGather,
                                       Collective::kReduceScatter, Collective::kBroadcast,
                                       Collective::kReduce};
// The ones with a single TCP algorithm (direct).
constexpr Collective kDirectOnly[] = {Collective::kAllToAll, Collective::kGather,
                                      Collective::kScatter, Collective::kBarrier};
// The values XCCL_ALGO can force.
constexpr Algorithm kAlgorithms[] = {Algorithm::kAuto, Algorithm::kDirect, Algorithm::kRing,
                                     Algorithm::kShm};
constexpr algo::Locality kLocalities[] = {algo::Locality::kNone, algo::Locality::kOneHost,
                                          algo::Locality::kPerHost};

// planCpu's choice as one value: the route where it is not TCP, else the TCP algorithm (what the
// grids below were written against). kHierarchicalRoute stands for the hierarchical route, which
// is no algorithm: a value outside Algorithm's.
constexpr Algorithm kHierarchicalRoute = static_cast<Algorithm>(100);

Algorithm chosen(Collective c, size_t bytes, int world, const algo::Tunables& t,
                 algo::Locality locality = algo::Locality::kNone) {
  const algo::CpuPlan plan = algo::planCpu({c, bytes}, algo::GroupShape{world, locality}, t);
  switch (plan.route) {
    case algo::CpuRoute::kShm: return Algorithm::kShm;
    case algo::CpuRoute::kHierarchical: return kHierarchicalRoute;
    case algo::CpuRoute::kNet: break;
  }
  return plan.algorithm;
}

std::vector<size_t> sizesAround(size_t threshold) {
  return {0, 1, threshold - 1, threshold, threshold + 1, size_t{1} << 40, SIZE_MAX};
}

TEST(CpuPlan, Defaults) {
  algo::Tunables t;
  EXPECT_EQ(t.smallMessageBytes, 64u * 1024);
  EXPECT_EQ(t.ringChunkBytes, 512u * 1024);
  EXPECT_EQ(t.forced, Algorithm::kAuto);
}

// Rule 4 of planCpu (cpu_plan.h): direct at or below smallMessageBytes per rank, ring above;
// with one or two ranks every collective but all_reduce is direct whatever the size.
TEST(CpuPlan, AutoGrid) {
  for (size_t threshold : {size_t{64} * 1024, size_t{1000}, size_t{1}}) {
    algo::Tunables t;
    t.smallMessageBytes = threshold;
    for (size_t bytes : sizesAround(threshold)) {
      for (int world = 1; world <= 8; ++world) {
        for (Collective c : kCollectives) {
          const bool small = bytes <= threshold;
          const Algorithm want = (small || (world <= 2 && c != Collective::kAllReduce))
                                     ? Algorithm::kDirect
                                     : Algorithm::kRing;
          EXPECT_EQ(chosen(c, bytes, world, t), want)
              << algo::collectiveName(c) << " bytes=" << bytes << " world=" << world
              << " threshold=" << threshold;
        }
      }
    }
  }
}

TEST(CpuPlan, SpotChecksWithDefaults) {
  const algo::Tunables t;
  EXPECT_EQ(chosen(Collective::kAllReduce, 64 * 1024, 4, t), Algorithm::kDirect);
  EXPECT_EQ(chosen(Collective::kAllReduce, 64 * 1024 + 1, 4, t), Algorithm::kRing);
  EXPECT_EQ(chosen(Collective::kAllReduce, 64 * 1024 + 1, 2, t), Algorithm::kRing);
  EXPECT_EQ(chosen(Collective::kBroadcast, size_t{1} << 30, 2, t), Algorithm::kDirect);
  EXPECT_EQ(chosen(Collective::kAllGather, 1 << 20, 3, t), Algorithm::kRing);
  EXPECT_EQ(chosen(Collective::kReduceScatter, 0, 8, t), Algorithm::kDirect);
}

TEST(CpuPlan, ForcedAlgorithmWinsEverywhere) {
  for (Algorithm forced : {Algorithm::kDirect, Algorithm::kRing}) {
    algo::Tunables t;
    t.forced = forced;
    for (size_t bytes : sizesAround(t.smallMessageBytes)) {
      for (int world = 1; world <= 8; ++world) {
        for (Collective c : kCollectives) {
          EXPECT_EQ(chosen(c, bytes, world, t), forced)
              << algo::collectiveName(c) << " bytes=" << bytes << " world=" << world;
        }
      }
    }
  }
}

// Transport choice over the whole grid: collective x size x world x locality x every forced
// value. The expectation is written out per case, independently of the implementation's order
// of tests.
TEST(CpuPlan, TransportGrid) {
  std::vector<Collective> all(std::begin(kCollectives), std::end(kCollectives));
  all.insert(all.end(), std::begin(kDirectOnly), std::end(kDirectOnly));
  for (Algorithm forced : kAlgorithms) {
    algo::Tunables t;
    t.forced = forced;
    for (size_t bytes : sizesAround(t.smallMessageBytes)) {
      for (int world = 1; world <= 8; ++world) {
        for (Collective c : all) {
          const bool hasRing =
              std::find(std::begin(kDirectOnly), std::end(kDirectOnly), c) == std::end(kDirectOnly);
          const bool small = bytes <= t.smallMessageBytes;
          const Algorithm tcpAuto = !hasRing || small || (world <= 2 && c != Collective::kAllReduce)
                                        ? Algorithm::kDirect
                                        : Algorithm::kRing;
          for (algo::Locality locality : kLocalities) {
            Algorithm want = tcpAuto;  // no shared memory
            if (forced == Algorithm::kDirect) {
              want = Algorithm::kDirect;  // every collective has direct
            } else if (forced == Algorithm::kRing && hasRing) {
              want = Algorithm::kRing;
            } else if (locality == algo::Locality::kOneHost) {
              want = Algorithm::kShm;  // auto, shm, or ring where there is none
            } else if (locality == algo::Locality::kPerHost) {
              want = kHierarchicalRoute;  // auto, shm, or ring where there is none
            }
            EXPECT_EQ(chosen(c, bytes, world, t, locality), want)
                << algo::collectiveName(c) << " bytes=" << bytes << " world=" << world
                << " locality=" << static_cast<int>(locality)
                << " forced=" << algo::algorithmName(forced);
          }
        }
      }
    }
  }
}

TEST(CpuPlan, SharedMemorySpotChecks) {
  using algo::Locality;
  algo::Tunables t;
  // One host: every collective at every size goes over shared memory...
  EXPECT_EQ(chosen(Collective::kAllReduce, 8, 2, t, Locality::kOneHost), Algorithm::kShm);
  EXPECT_EQ(chosen(Collective::kAllReduce, size_t{64} << 20, 4, t, Locality::kOneHost),
            Algorithm::kShm);
  EXPECT_EQ(chosen(Collective::kAllToAll, 0, 3, t, Locality::kOneHost), Algorithm::kShm);
  EXPECT_EQ(chosen(Collective::kBarrier, 0, 4, t, Locality::kOneHost), Algorithm::kShm);
  // ...segments per host: every collective is hierarchical...
  EXPECT_EQ(chosen(Collective::kAllReduce, 8, 4, t, Locality::kPerHost), kHierarchicalRoute);
  EXPECT_EQ(chosen(Collective::kAllGather, 1 << 20, 4, t, Locality::kPerHost), kHierarchicalRoute);
  EXPECT_EQ(chosen(Collective::kAllToAll, 0, 3, t, Locality::kPerHost), kHierarchicalRoute);
  // ...none: the TCP rule, as if shared memory did not exist.
  EXPECT_EQ(chosen(Collective::kAllReduce, 8, 2, t), Algorithm::kDirect);
  EXPECT_EQ(chosen(Collective::kAllToAll, size_t{64} << 20, 4, t), Algorithm::kDirect);
  // Forcing shm without shared memory falls back to the TCP rule, so the TCP algorithms' own
  // calls (which never pass a locality) still get a TCP algorithm.
  t.forced = Algorithm::kShm;
  EXPECT_EQ(chosen(Collective::kAllReduce, 1 << 20, 4, t), Algorithm::kRing);
  EXPECT_EQ(chosen(Collective::kBroadcast, 8, 4, t), Algorithm::kDirect);
  EXPECT_EQ(chosen(Collective::kAllReduce, 8, 4, t, Locality::kPerHost), kHierarchicalRoute);
  // Forcing ring keeps ring collectives on TCP; the ones without a ring stay on shm.
  t.forced = Algorithm::kRing;
  EXPECT_EQ(chosen(Collective::kAllGather, 8, 4, t, Locality::kOneHost), Algorithm::kRing);
  EXPECT_EQ(chosen(Collective::kAllReduce, 8, 4, t, Locality::kPerHost), Algorithm::kRing);
  EXPECT_EQ(chosen(Collective::kScatter, 8, 4, t, Locality::kOneHost), Algorithm::kShm);
  EXPECT_EQ(chosen(Collective::kScatter, 8, 4, t), Algorithm::kDirect);
  // Forcing direct pins everything to TCP.
  t.forced = Algorithm::kDirect;
  EXPECT_EQ(chosen(Collective::kBarrier, 0, 4, t, Locality::kOneHost), Algorithm::kDirect);
  EXPECT_EQ(chosen(Collective::kAllReduce, 0, 4, t, Locality::kPerHost), Algorithm::kDirect);
}

TEST(CpuPlan, ParseAlgorithm) {
  EXPECT_EQ(algo::parseAlgorithm(""), Algorithm::kAuto);
  EXPECT_EQ(algo::parseAlgorithm("auto"), Algorithm::kAuto);
  EXPECT_EQ(algo::parseAlgorithm("direct"), Algorithm::kDirect);
  EXPECT_EQ(algo::parseAlgorithm("ring"), Algorithm::kRing);
  EXPECT_EQ(algo::parseAlgorithm("shm"), Algorithm::kShm);
  for (Algorithm a : kAlgorithms) {
    EXPECT_EQ(algo::parseAlgorithm(algo::algorithmName(a)), a);
  }
  EXPECT_STREQ(algo::algorithmName(Algorithm::kRing), "ring");
}

TEST(CpuPlan, ParseAlgorithmRejectsUnknownNames) {
  for (const char* bad : {"Ring", "DIRECT", "tree", " ring", "ring ", "directx", "0", "auto,ring",
                          "SHM", "tcp", "hierarchical"}) {
    EXPECT_TRUE(throwsError(
        ErrorKind::kInvalidArgument, [&] { algo::parseAlgorithm(bad); },
        std::string("'") + bad + "'"))
        << bad;
  }
  EXPECT_TRUE(throwsError(
      ErrorKind::kInvalidArgument, [] { algo::parseAlgorithm("tree"); },
      "auto, direct, ring, shm"));
}

// Environment values are cached for the life of the process, so only the defaults are testable
// in this one; overrides need a fresh process.
TEST(CpuPlan, FromEnvironmentDefaults) {
  for (const char* var : {"XCCL_ALGO", "XCCL_SMALL_MSG_BYTES", "XCCL_RING_CHUNK_BYTES"}) {
    if (const char* value = std::getenv(var); value != nullptr && *value != '\0') {
      GTEST_SKIP() << var << " is set in the environment";
    }
  }
  const algo::Tunables fromEnv = algo::Tunables::fromEnvironment(), defaults;
  EXPECT_EQ(fromEnv.smallMessageBytes, defaults.smallMessageBytes);
  EXPECT_EQ(fromEnv.ringChunkBytes, defaults.ringChunkBytes);
  EXPECT_EQ(fromEnv.forced, Algorithm::kAuto);
}

}  // namespace
}  // namespace xccl
