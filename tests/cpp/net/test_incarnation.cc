// net::newIncarnation (net/rendezvous/incarnation.h), ranks as threads over one MemoryStore that
// outlives every creation, as torch's elastic agent's store outlives every attempt: each creation's
// keys are its own, an earlier creation's are never read, and a creation that lost a rank fails on
// every rank within the timeout instead of mixing incarnations.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "net/rendezvous/bootstrap.h"
#include "net/rendezvous/incarnation.h"
#include "net/rendezvous/store.h"
#include "threads.h"

namespace xccl::net {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kRanks = 3;

// One group creation on `store` by the ranks in `present` (the others lost before they start):
// each enters its incarnation and all-gathers `value` under it. Returns every rank's view ("" for
// an absent rank), or "error: <message>" where it threw.
std::vector<std::string> create(MemoryStore& store, const std::vector<int>& present,
                                const std::string& value, std::chrono::milliseconds timeout,
                                std::chrono::milliseconds rankZeroLate = 0ms) {
  std::vector<std::string> seen(kRanks);
  testing::runThreads(static_cast<int>(present.size()), [&](int i) {
    const int rank = present[i];
    // Ranks 1 and 2 first: they must not take what rank 0 left in the store last time.
    if (rank == 0) std::this_thread::sleep_for(rankZeroLate);
    try {
      const Incarnation incarnation = newIncarnation(store, "job/0", rank, kRanks, timeout);
      const Bootstrap bootstrap(store, incarnation.prefix + "group", rank, kRanks, timeout);
      std::string all;
      for (const std::string& v : bootstrap.allGather("value", value + std::to_string(rank))) {
        all += v + ",";
      }
      seen[rank] = all + incarnation.tag();
    } catch (const Error& e) {
      seen[rank] = std::string("error: ") + e.what();
    }
  });
  return seen;
}

// The tag after the last comma: the incarnation every rank entered.
std::string tagOf(const std::string& seen) { return seen.substr(seen.rfind(',') + 1); }

TEST(Incarnation, ARecreatedGroupNeverReadsAnEarlierCreationsKeys) {
  MemoryStore store;
  std::set<std::string> tags;
  for (int creation = 0; creation < 4; ++creation) {
    const std::string value = "c" + std::to_string(creation) + "r";
    // From the second creation on, rank 0 arrives last: ranks 1 and 2 find its earlier token in
    // the store and must wait for this creation's.
    const auto seen = create(store, {0, 1, 2}, value, 5s, creation == 0 ? 0ms : 100ms);
    const std::string expected = value + "0," + value + "1," + value + "2,";
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(seen[r].substr(0, expected.size()), expected) << "creation " << creation;
      EXPECT_EQ(tagOf(seen[r]), tagOf(seen[0])) << "creation " << creation;
    }
    tags.insert(tagOf(seen[0]));
  }
  EXPECT_EQ(tags.size(), 4u) << "each creation has a token of its own";
}

TEST(Incarnation, ACreationThatLostARankFailsEverywhereThenTheNextOneWorks) {
  // Rank 2's process dies before it counts creation 1; creation 2 starts while the store still
  // says rank 2's slot is one creation behind. Rank 2 reads creation 1's token: it must refuse it
  // (and every rank fail, bounded), never join creation 1's keys. Creation 3 works.
  MemoryStore store;
  const auto start = Clock::now();
  auto lost = create(store, {0, 1}, "a", 300ms);
  EXPECT_NE(lost[0].find("error: "), std::string::npos) << lost[0];
  EXPECT_NE(lost[0].find("ranks [2] did not join"), std::string::npos) << lost[0];
  auto second = create(store, {0, 1, 2}, "b", 500ms, 50ms);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(second[r].rfind("error: ", 0), 0u) << "rank " << r << ": " << second[r];
  }
  EXPECT_NE(second[2].find("but rank 0's #2"), std::string::npos) << second[2];
  EXPECT_LT(Clock::now() - start, 3s) << "every failure within its timeout";
  const auto third = create(store, {0, 1, 2}, "c", 5s, 50ms);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(third[r].substr(0, 9), "c0,c1,c2,") << "rank " << r << ": " << third[r];
  }
}

TEST(Incarnation, ALostRankZeroIsATimeoutThenTheCountsAreBackInStep) {
  // Rank 0 dies before counting, twice: the others are two creations ahead of it.
  MemoryStore store;
  create(store, {1, 2}, "a", 200ms);
  create(store, {1, 2}, "a", 200ms);
  const auto ahead = create(store, {0, 1, 2}, "b", 400ms);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(ahead[r].rfind("error: ", 0), 0u) << "rank " << r << ": " << ahead[r];
  }
  const auto next = create(store, {0, 1, 2}, "c", 5s);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(next[r].substr(0, 9), "c0,c1,c2,") << "rank " << r << ": " << next[r];
  }
}

TEST(Incarnation, AForeignTokenIsAClearError) {
  MemoryStore store;
  store.set("xccl/inc/job/0/3/token/1", toBytes("not a token"));
  const auto seen = create(store, {0, 1, 2}, "a", 300ms, 100ms);
  EXPECT_NE(seen[1].find("holds 11 bytes that are not a creation token"), std::string::npos)
      << seen[1];
}

TEST(Incarnation, TheLauncherScopeIsSanitisedAndBounded) {
  EXPECT_EQ(launcherScope(nullptr, nullptr), "");
  EXPECT_EQ(launcherScope("", ""), "");
  EXPECT_EQ(launcherScope("run-1.a", "3"), "run-1.a/3");
  EXPECT_EQ(launcherScope("a/b c", nullptr), "a_b_c/_");
  EXPECT_EQ(launcherScope(std::string(500, 'x').c_str(), "0"), std::string(64, 'x') + "/0");
  // Restart counts keep groups of different attempts apart even with equal tokens.
  EXPECT_NE(sharedIncarnation(launcherScope("r", "0")).prefix,
            sharedIncarnation(launcherScope("r", "1")).prefix);
}

}  // namespace
}  // namespace xccl::net
