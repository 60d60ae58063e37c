// The plan vocabulary's table (common/vocabulary.h): every name finds its value again, the kernel
// families find their kernels, and cpuLegal is the rule the tuning parser applied before the
// table existed (restated here independently, over every triple).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "common/vocabulary.h"

namespace xccl::vocab {
namespace {

template <typename Row, size_t N>
void expectRoundTrip(const Row (&rows)[N]) {
  std::set<std::string> seen;
  for (const Row& row : rows) {
    EXPECT_STREQ(name(row.id), row.name);
    decltype(row.id) found{};
    ASSERT_TRUE(lookup(row.name, &found)) << row.name;
    EXPECT_EQ(found, row.id) << row.name;
    EXPECT_TRUE(seen.insert(row.name).second) << "two rows named " << row.name;
  }
}

TEST(Vocabulary, EveryNameFindsItsValue) {
  expectRoundTrip(kCollectiveRows);
  expectRoundTrip(kCpuRouteRows);
  expectRoundTrip(kAlgorithmRows);
  expectRoundTrip(kGpuCollectiveRows);
  expectRoundTrip(kGpuRouteRows);
  expectRoundTrip(kLocalityRows);
  Algorithm algorithm{};
  EXPECT_FALSE(lookup("hierarchical", &algorithm));  // a route, not an algorithm
  EXPECT_STREQ(name(static_cast<Algorithm>(99)), "?");
}

TEST(Vocabulary, KernelFamiliesFindTheirKernels) {
  for (const GpuKernelRow& row : kGpuKernelRows) {
    if (row.id == GpuKernel::kNone) continue;
    EXPECT_TRUE(hasKernel(row.collective)) << row.name;
    GpuKernel kernel = GpuKernel::kNone;
    ASSERT_TRUE(kernelOf(row.collective, row.family, &kernel)) << row.name;
    EXPECT_EQ(kernel, row.id) << row.name;
    EXPECT_STREQ(family(row.id), row.family);
  }
  GpuKernel kernel = GpuKernel::kBroadcast;
  EXPECT_TRUE(kernelOf(GpuCollective::kReduce, kNoneWord, &kernel));
  EXPECT_EQ(kernel, GpuKernel::kNone);
  EXPECT_FALSE(kernelOf(GpuCollective::kAllGather, kOneShotWord, &kernel));
  EXPECT_FALSE(kernelOf(GpuCollective::kReduce, kAllPairsWord, &kernel));
  EXPECT_FALSE(hasKernel(GpuCollective::kReduce));
  EXPECT_FALSE(hasKernel(GpuCollective::kOther));
}

// The tuning parser's rule as it was written before the table (algo/tuning.cc parseCpu).
bool previousRule(Collective c, CpuRoute route, Algorithm a) {
  if (a == Algorithm::kAuto) return false;  // the parser never accepted auto
  const bool ring = c != Collective::kAllToAll && c != Collective::kGather &&
                    c != Collective::kScatter && c != Collective::kBarrier;
  const bool reduction = c == Collective::kAllReduce || c == Collective::kReduce;
  const bool shot = a == Algorithm::kOneShot || a == Algorithm::kTwoShot;
  switch (route) {
    case CpuRoute::kNet: return a == Algorithm::kDirect || (a == Algorithm::kRing && ring);
    case CpuRoute::kShm: return reduction ? shot : a == Algorithm::kShm;
    case CpuRoute::kHierarchical: return !shot || reduction || c == Collective::kReduceScatter;
  }
  return false;
}

TEST(Vocabulary, LegalTriplesAreThePreviousRule) {
  int legal = 0;
  for (const CollectiveRow& c : kCollectiveRows) {
    for (const CpuRouteRow& r : kCpuRouteRows) {
      for (const AlgorithmRow& a : kAlgorithmRows) {
        EXPECT_EQ(cpuLegal(c.id, r.id, a.id), previousRule(c.id, r.id, a.id))
            << c.name << " " << r.name << " " << a.name;
        legal += cpuLegal(c.id, r.id, a.id) ? 1 : 0;
      }
    }
  }
  // tcp: 9 direct + 5 ring; shm: 2 reductions x 2 shots + 7 shm; hierarchical: 9 x 3 (direct,
  // ring, shm) + 3 in-host reductions x 2 shots.
  EXPECT_EQ(legal, 14 + 11 + 33);
}

TEST(Vocabulary, ForcedChoices) {
  std::string forceable;
  for (const AlgorithmRow& a : kAlgorithmRows) {
    if (a.forceable) forceable += std::string(forceable.empty() ? "" : ",") + a.name;
  }
  EXPECT_EQ(forceable, "auto,direct,ring,shm");  // XCCL_ALGO's values, in the docs' order
  EXPECT_STREQ(name(GpuForce::kVendor), "nccl");
  EXPECT_STREQ(kGpuForceRows[static_cast<size_t>(GpuForce::kVendor)].synonyms[1], "vendor");
  // The forced kernel choices name kernel families.
  for (GpuForce f : {GpuForce::kOneShot, GpuForce::kTwoShot, GpuForce::kAllPairs}) {
    bool names = false;
    for (const GpuKernelRow& k : kGpuKernelRows) {
      names = names || std::string(k.family) == name(f);
    }
    EXPECT_TRUE(names) << name(f);
  }
}

}  // namespace
}  // namespace xccl::vocab
