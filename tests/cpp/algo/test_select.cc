// Algorithm selection (select.h): a pure function, checked over a grid without any transport.
#include <cstdint>
#include <cstdlib>

#include "algo/select.h"
#include "algo_testing.h"

namespace xccl {
namespace {

using algo::Algorithm;
using algo::Collective;
using testing::throwsError;

constexpr Collective kCollectives[] = {Collective::kAllReduce, Collective::kAllGather,
                                       Collective::kReduceScatter, Collective::kBroadcast,
                                       Collective::kReduce};

const char* name(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "allreduce";
    case Collective::kAllGather: return "allgather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
  }
  return "?";
}

std::vector<size_t> sizesAround(size_t threshold) {
  return {0, 1, threshold - 1, threshold, threshold + 1, size_t{1} << 40, SIZE_MAX};
}

TEST(Select, Defaults) {
  algo::Tunables t;
  EXPECT_EQ(t.smallMessageBytes, 64u * 1024);
  EXPECT_EQ(t.ringChunkBytes, 512u * 1024);
  EXPECT_EQ(t.forced, Algorithm::kAuto);
}

// The rule of select.h/select.cc: direct at or below smallMessageBytes per rank, ring above;
// with one or two ranks every collective but all_reduce is direct whatever the size.
TEST(Select, AutoGrid) {
  for (size_t threshold : {size_t{64} * 1024, size_t{1000}, size_t{1}}) {
    algo::Tunables t;
    t.smallMessageBytes = threshold;
    for (size_t bytes : sizesAround(threshold)) {
      for (int world = 1; world <= 8; ++world) {
        for (Collective c : kCollectives) {
          const bool small = bytes <= threshold;
          const Algorithm want =
              (small || (world <= 2 && c != Collective::kAllReduce)) ? Algorithm::kDirect
                                                                     : Algorithm::kRing;
          EXPECT_EQ(algo::select(c, bytes, world, t), want)
              << name(c) << " bytes=" << bytes << " world=" << world
              << " threshold=" << threshold;
        }
      }
    }
  }
}

TEST(Select, SpotChecksWithDefaults) {
  const algo::Tunables t;
  EXPECT_EQ(algo::select(Collective::kAllReduce, 64 * 1024, 4, t), Algorithm::kDirect);
  EXPECT_EQ(algo::select(Collective::kAllReduce, 64 * 1024 + 1, 4, t), Algorithm::kRing);
  EXPECT_EQ(algo::select(Collective::kAllReduce, 64 * 1024 + 1, 2, t), Algorithm::kRing);
  EXPECT_EQ(algo::select(Collective::kBroadcast, size_t{1} << 30, 2, t), Algorithm::kDirect);
  EXPECT_EQ(algo::select(Collective::kAllGather, 1 << 20, 3, t), Algorithm::kRing);
  EXPECT_EQ(algo::select(Collective::kReduceScatter, 0, 8, t), Algorithm::kDirect);
}

TEST(Select, ForcedAlgorithmWinsEverywhere) {
  for (Algorithm forced : {Algorithm::kDirect, Algorithm::kRing}) {
    algo::Tunables t;
    t.forced = forced;
    for (size_t bytes : sizesAround(t.smallMessageBytes)) {
      for (int world = 1; world <= 8; ++world) {
        for (Collective c : kCollectives) {
          EXPECT_EQ(algo::select(c, bytes, world, t), forced)
              << name(c) << " bytes=" << bytes << " world=" << world;
        }
      }
    }
  }
}

TEST(Select, ParseAlgorithm) {
  EXPECT_EQ(algo::parseAlgorithm(""), Algorithm::kAuto);
  EXPECT_EQ(algo::parseAlgorithm("auto"), Algorithm::kAuto);
  EXPECT_EQ(algo::parseAlgorithm("direct"), Algorithm::kDirect);
  EXPECT_EQ(algo::parseAlgorithm("ring"), Algorithm::kRing);
  for (Algorithm a : {Algorithm::kAuto, Algorithm::kDirect, Algorithm::kRing}) {
    EXPECT_EQ(algo::parseAlgorithm(algo::algorithmName(a)), a);
  }
  EXPECT_STREQ(algo::algorithmName(Algorithm::kRing), "ring");
}

TEST(Select, ParseAlgorithmRejectsUnknownNames) {
  for (const char* bad :
       {"Ring", "DIRECT", "tree", " ring", "ring ", "directx", "0", "auto,ring"}) {
    EXPECT_TRUE(throwsError(ErrorKind::kInvalidArgument, [&] { algo::parseAlgorithm(bad); },
                            std::string("'") + bad + "'"))
        << bad;
  }
  EXPECT_TRUE(throwsError(ErrorKind::kInvalidArgument, [] { algo::parseAlgorithm("tree"); },
                          "auto, direct, ring"));
}

// Environment values are cached for the life of the process, so only the defaults are testable
// in this one; overrides need a fresh process.
TEST(Select, FromEnvironmentDefaults) {
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
