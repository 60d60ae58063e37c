// Agreement on the tuning table at group creation (algo/tuning_agree.h), ranks as threads over a
// MemoryStore: rank 0's table is every rank's, whatever the others found; a malformed or
// oversized rank-0 text, or one made for another shape, means the rules on every rank, and
// nothing throws.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "algo/tuning_agree.h"
#include "net/rendezvous/store.h"
#include "threads.h"

namespace xccl::algo {
namespace {

using namespace std::chrono_literals;

const std::string kTable3 =
    "xccl-tuning 1\nworld 3 1 one_host\ncpu all_reduce 0 inf shm two_shot 0 5 9\n";
const std::string kOther3 =
    "xccl-tuning 1\nworld 3 1 one_host\ncpu all_reduce 0 inf tcp ring 65536 5 9\n";
const GroupShape kOneHost3{3, Locality::kOneHost, 1, 3};

// Every rank's agreement when rank r answered answers[r], in a group of `shape`.
std::vector<TuningAgreement> agree(const std::vector<TuningAnswer>& answers,
                                   const GroupShape& shape) {
  const int size = static_cast<int>(answers.size());
  net::MemoryStore store;
  std::vector<TuningAgreement> out(answers.size());
  testing::runThreads(size, [&](int rank) {
    out[rank] = agreeOnTuning(store, "tuning", rank, size, answers[rank], shape, 10s);
  });
  return out;
}

TEST(AgreeOnTuning, EveryRankFollowsRankZero) {
  const auto all = agree({{kTable3, "file"}, {kOther3, "file"}, {"", "no table at /x"}}, kOneHost3);
  for (int r = 0; r < 3; ++r) {
    ASSERT_NE(all[r].table, nullptr) << r;
    EXPECT_EQ(*all[r].table, parseTuningTable(kTable3)) << r;
    EXPECT_EQ(all[r].text, kTable3) << r;
    EXPECT_EQ(all[r].why, "rank 0's table") << r;
    EXPECT_EQ(all[r].dissenting, (std::vector<int>{1, 2})) << r;
  }
}

TEST(AgreeOnTuning, NoTableOnRankZeroIsNoTableAnywhere) {
  const auto all = agree({{"", "XCCL_TUNING=off"}, {kTable3, "f"}, {kTable3, "f"}}, kOneHost3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(all[r].table, nullptr) << r;
    EXPECT_EQ(all[r].text, "") << r;
    EXPECT_EQ(all[r].why, "no table: XCCL_TUNING=off") << r;
    EXPECT_EQ(all[r].dissenting, (std::vector<int>{1, 2})) << r;
  }
}

TEST(AgreeOnTuning, ACorruptRankZeroTextMeansTheRulesOnEveryRank) {
  const std::string corrupt = "xccl-tuning 1\nworld 3 1 one_host\ncpu all_reduce 0 inf shm "
                              "two_shot 0 5 18446744073709551616\n";
  const auto all = agree({{corrupt, "f"}, {kTable3, "f"}, {corrupt, "f"}}, kOneHost3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(all[r].table, nullptr) << r;
    EXPECT_NE(all[r].parseError.find("tuning table line 3:"), std::string::npos) << r;
    EXPECT_NE(all[r].why.find("malformed"), std::string::npos) << r;
    EXPECT_EQ(all[r].dissenting, (std::vector<int>{1})) << r;
  }
}

TEST(AgreeOnTuning, AnOversizedTextNeverTravels) {
  const std::string huge = kTable3 + std::string(kTuningMaxTextBytes, 'x');
  const auto all = agree({{huge, "f"}, {huge, "f"}}, GroupShape{2, Locality::kOneHost, 1, 2});
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(all[r].table, nullptr) << r;
    EXPECT_NE(all[r].why.find("more than the 1048576 allowed"), std::string::npos) << all[r].why;
  }
}

TEST(AgreeOnTuning, ATableForAnotherShapeIsNotUsed) {
  const auto all =
      agree({{kTable3, "f"}, {kTable3, "f"}, {kTable3, "f"}}, GroupShape{3, Locality::kNone, 1, 1});
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(all[r].table, nullptr) << r;
    EXPECT_EQ(all[r].why, "table for world 3/1/one_host, group is 3/1/none") << r;
    EXPECT_TRUE(all[r].dissenting.empty()) << r;
  }
  // Hosts come from the group's shape (its layout's census): ranks on two hosts without shared
  // memory take a table made there, and one host's table is not theirs.
  const std::string twoHosts = "xccl-tuning 1\nworld 3 2 none\n";
  const GroupShape spread{3, Locality::kNone, 2, 1};
  for (const TuningAgreement& a :
       agree({{twoHosts, "f"}, {twoHosts, "f"}, {twoHosts, "f"}}, spread)) {
    EXPECT_NE(a.table, nullptr) << a.why;
  }
  const std::string oneHost = "xccl-tuning 1\nworld 3 1 none\n";
  for (const TuningAgreement& a : agree({{oneHost, "f"}, {oneHost, "f"}, {oneHost, "f"}}, spread)) {
    EXPECT_EQ(a.table, nullptr) << a.why;
    EXPECT_EQ(a.why, "table for world 3/1/none, group is 3/2/none");
  }
}

TEST(TuningVerdict, UnreadableAnswersCountAsNoTable) {
  const net::Settings good = encodeTuningAnswer({kTable3, "f"});
  // Rank 0's answer damaged (decoded as nothing): no table, rank 1 dissenting.
  TuningAgreement v = tuningVerdict({{}, good, {}}, kOneHost3);
  EXPECT_EQ(v.table, nullptr);
  EXPECT_EQ(v.why, "no table");
  EXPECT_EQ(v.dissenting, (std::vector<int>{1}));
  // Another rank's answer damaged: rank 0's table stands.
  v = tuningVerdict({good, {}, good}, kOneHost3);
  EXPECT_NE(v.table, nullptr);
  EXPECT_EQ(v.dissenting, (std::vector<int>{1}));
}

}  // namespace
}  // namespace xccl::algo
