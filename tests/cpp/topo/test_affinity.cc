// CPU affinity: the thread pinning that progress threads use.
#include <gtest/gtest.h>

#include <thread>

#include "topo/affinity.h"

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

}  // namespace
}  // namespace xccl::topo
