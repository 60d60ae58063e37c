// Group-wide agreement through the store (net/rendezvous/agree.h): settings compared at group
// creation and the texts of verdicts, with ranks as threads over a MemoryStore (agree() itself:
// test_bootstrap.cc). Every rank must reach the same
// verdict, word for word, so each test collects every rank's answer and compares them all.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/error.h"
#include "net/rendezvous/agree.h"
#include "net/rendezvous/store.h"
#include "threads.h"

namespace xccl::net {
namespace {

using namespace std::chrono_literals;

TEST(FormatRanks, CollapsesRunsOfSortedDistinctRanks) {
  EXPECT_EQ(formatRanks({}), "");
  EXPECT_EQ(formatRanks({3}), "3");
  EXPECT_EQ(formatRanks({0, 1, 2, 4, 7, 8}), "0-2,4,7-8");
  EXPECT_EQ(formatRanks({8, 7, 2, 2, 0, 1, 4}), "0-2,4,7-8");
  EXPECT_EQ(formatRanks({5, 9}), "5,9");
}

TEST(SettingsCodec, RoundTripsAnyBytesAndRejectsDamage) {
  const Settings settings = {{"A", "1"}, {"", ""}, {"B|x", std::string("a\0b\n;c", 6)}};
  EXPECT_EQ(decodeSettings(encodeSettings(settings)), settings);
  EXPECT_EQ(decodeSettings(encodeSettings({})), Settings{});
  Bytes bytes = encodeSettings(settings);
  for (size_t cut : {size_t{0}, size_t{3}, bytes.size() - 1}) {
    const Bytes truncated(bytes.begin(), bytes.begin() + cut);
    EXPECT_EQ(testing::errorKindOf([&] { decodeSettings(truncated); }), ErrorKind::kInternal)
        << cut;
  }
  bytes.push_back(0);
  EXPECT_EQ(testing::errorKindOf([&] { decodeSettings(bytes); }), ErrorKind::kInternal);
}

TEST(SettingsMismatch, NamesEachDifferingSettingAndGroupsRanksByValue) {
  const Settings base = {{"XCCL_GPU_ALGO", "auto"}, {"XCCL_GPU_WORKSPACE_BYTES", "33554432"}};
  std::vector<Settings> byRank(5, base);
  EXPECT_EQ(settingsMismatch(byRank), "");
  byRank[3][0].second = "kernel";
  EXPECT_EQ(settingsMismatch(byRank),
            "XCCL_GPU_ALGO differs across ranks: ranks 0-2,4 have 'auto', rank 3 has 'kernel'");
  byRank[0][1].second = "";
  byRank[4][1].second = "65536";
  EXPECT_EQ(settingsMismatch(byRank),
            "XCCL_GPU_ALGO differs across ranks: ranks 0-2,4 have 'auto', rank 3 has 'kernel'; "
            "XCCL_GPU_WORKSPACE_BYTES differs across ranks: rank 0 has (unset), ranks 1-3 have "
            "'33554432', rank 4 has '65536'");
}

TEST(SettingsMismatch, ANameOneRankLacksIsADifference) {
  std::vector<Settings> byRank = {{{"A", "1"}}, {{"A", "1"}, {"B", "2"}}};
  EXPECT_EQ(settingsMismatch(byRank),
            "B differs across ranks: rank 0 has (absent), rank 1 has '2'");
  EXPECT_EQ(settingsMismatch({}), "");
  EXPECT_EQ(settingsMismatch({{{"A", "x"}}}), "") << "one rank always agrees with itself";
}

// Runs fn(rank) on `size` threads and returns each rank's outcome: "" or the xccl::Error text
// with its kind.
std::vector<std::string> outcomes(int size, const std::function<void(int)>& fn) {
  std::vector<std::string> out(size);
  testing::runThreads(size, [&](int rank) {
    try {
      fn(rank);
    } catch (const Error& e) {
      out[rank] = std::string(errorKindName(e.kind())) + ": " + e.what();
    }
  });
  return out;
}

class AgreeOnSettings : public ::testing::TestWithParam<int> {};

TEST_P(AgreeOnSettings, EqualSettingsPassOnEveryRank) {
  const int size = GetParam();
  MemoryStore store;
  const Settings settings = {{"XCCL_ALGO", "auto"}, {"XCCL_SHM_TWO_SHOT_BYTES", ""}};
  for (const std::string& outcome : outcomes(size, [&](int rank) {
         agreeOnSettings(store, "settings", rank, size, settings, 10s);
       })) {
    EXPECT_EQ(outcome, "");
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AgreeOnSettings, ::testing::Values(1, 2, 3, 5));

// From 2 ranks: one rank cannot differ from itself.
class DisagreeOnSettings : public ::testing::TestWithParam<int> {};

TEST_P(DisagreeOnSettings, OneDifferentRankFailsEveryRankAlike) {
  const int size = GetParam();
  MemoryStore store;
  const int odd = size - 1;
  const std::vector<std::string> out = outcomes(size, [&](int rank) {
    const Settings settings = {{"XCCL_GPU_ALGO", rank == odd ? "two_shot" : "auto"},
                               {"XCCL_GPU_WORKSPACE_BYTES", "65536"}};
    agreeOnSettings(store, "settings", rank, size, settings, 10s);
  });
  const std::string others =
      size == 2 ? "rank 0 has" : "ranks 0-" + std::to_string(odd - 1) + " have";
  const std::string expected = "XCCL_GPU_ALGO differs across ranks: " + others + " 'auto', rank " +
                               std::to_string(odd) + " has 'two_shot'";
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(out[r].rfind("invalid argument: xccl: " + expected, 0), 0u) << out[r];
    EXPECT_EQ(out[r], out[0]) << "rank " << r << " saw a different verdict";
  }
  EXPECT_EQ(out[0].find("XCCL_GPU_WORKSPACE_BYTES"), std::string::npos) << "that one agreed";
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DisagreeOnSettings, ::testing::Values(2, 3, 5));

// Rank 0's answer is every rank's, whatever the others found (their own cache, another user's
// stamp): the group plans alike; the dissenting ranks are named alike on every rank.
class AgreeOnRankZero : public ::testing::TestWithParam<int> {};

TEST_P(AgreeOnRankZero, RankZerosAnswerWinsOnEveryRank) {
  const int size = GetParam();
  for (const std::string zero : {"verified", "unverified"}) {
    MemoryStore store;
    const std::string other = zero == "verified" ? "unverified" : "verified";
    std::vector<RankZeroVerdict> verdicts(size);
    testing::runThreads(size, [&](int rank) {
      // Ranks 0 and every third rank answer alike; the others differ.
      const std::string mine = rank % 3 == 0 ? zero : other;
      verdicts[rank] = agreeOnRankZero(store, "gpu_verified", rank, size, mine, 10s);
    });
    std::vector<int> expected;
    for (int r = 1; r < size; ++r) {
      if (r % 3 != 0) expected.push_back(r);
    }
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(verdicts[r].value, zero) << "rank " << r;
      EXPECT_EQ(verdicts[r].dissenting, expected) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AgreeOnRankZero, ::testing::Values(1, 2, 3, 5));

TEST(RankZeroVerdict, EmptyAndAlikeHaveNoDissent) {
  EXPECT_EQ(rankZeroVerdict({}).value, "");
  EXPECT_TRUE(rankZeroVerdict({"a", "a", "a"}).dissenting.empty());
  EXPECT_EQ(rankZeroVerdict({"b", "a", "b", "a"}).dissenting, (std::vector<int>{1, 3}));
}

TEST(AgreeOnSettingsArguments, BadRanksAreInvalidArguments) {
  MemoryStore store;
  EXPECT_EQ(testing::errorKindOf([&] { agreeOnSettings(store, "s", 0, 0, {}, 1s); }),
            ErrorKind::kInvalidArgument);
}

TEST(Tally, GroupsRanksWithTheSameReasonInOrderOfTheirLowestRank) {
  EXPECT_EQ(tally({}), "");
  EXPECT_EQ(tally({"", "", ""}), "");
  EXPECT_EQ(tally({"b", "a", "b", "", "a"}), "ranks 0,2: b; ranks 1,4: a");
  EXPECT_EQ(tally({"", "x", "x", "x"}), "ranks 1-3: x");
}

}  // namespace
}  // namespace xccl::net
