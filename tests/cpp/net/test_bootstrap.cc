// net::Bootstrap (net/rendezvous/bootstrap.h) and the host grouping built on it
// (net/rendezvous/hosts.h), with ranks as threads over a MemoryStore. Every rank must reach the
// same outcome, word for word, so each test collects every rank's answer and compares them all.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/error.h"
#include "net/rendezvous/bootstrap.h"
#include "net/rendezvous/group_layout.h"
#include "net/rendezvous/hosts.h"
#include "net/rendezvous/store.h"
#include "threads.h"

namespace xccl::net {
namespace {

using namespace std::chrono_literals;

// The message of the xccl::Error `fn` throws, with its kind; a test failure when it throws none.
std::string messageOf(const std::function<void()>& fn, ErrorKind* kind) {
  try {
    fn();
  } catch (const Error& e) {
    *kind = e.kind();
    return e.what();
  }
  ADD_FAILURE() << "no xccl::Error thrown";
  return "";
}

TEST(Bootstrap, AllGatherGivesEveryRankEveryValueInRankOrder) {
  constexpr int kRanks = 5;
  MemoryStore store;
  std::vector<std::vector<std::string>> seen(kRanks);
  testing::runThreads(kRanks, [&](int rank) {
    const Bootstrap bootstrap(store, "group", rank, kRanks, 10s);
    seen[rank] = bootstrap.allGather("values", "v" + std::to_string(rank * rank));
  });
  for (const auto& values : seen) {
    EXPECT_EQ(values, (std::vector<std::string>{"v0", "v1", "v4", "v9", "v16"}));
  }
  // Keys as the layers before the bootstrap wrote them: prefix/key/rank.
  EXPECT_EQ(toString(store.get("group/values/3", 1ms)), "v9");
}

TEST(Bootstrap, ATimeoutNamesEveryMissingRankAfterOneDeadline) {
  // Ranks 0 and 2 of 6 take part; 1, 3, 4 and 5 never come. One deadline for the whole exchange:
  // waiting out the timeout once per missing rank would take 4 x 400 ms.
  MemoryStore store;
  std::vector<std::string> messages(6);
  std::vector<ErrorKind> kinds(6, ErrorKind::kInternal);
  const auto start = std::chrono::steady_clock::now();
  testing::runThreads(3, [&](int thread) {
    if (thread == 1) return;
    const Bootstrap bootstrap(store, "g", thread, 6, 400ms);
    messages[thread] = messageOf([&] { bootstrap.allGather("k", "x"); }, &kinds[thread]);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1200ms);
  for (int rank : {0, 2}) {
    EXPECT_EQ(kinds[rank], ErrorKind::kTimeout);
    EXPECT_NE(messages[rank].find("ranks [1, 3, 4, 5] did not publish"), std::string::npos)
        << messages[rank];
    EXPECT_NE(messages[rank].find("'g/k' (rank " + std::to_string(rank) + " of 6)"),
              std::string::npos)
        << messages[rank];
  }
}

TEST(Bootstrap, UntilBoundsEveryExchangeByOneDeadline) {
  // The first exchange completes (rank 1 publishes it) and uses up the time; the second, which
  // rank 1 never joins, then fails at once instead of waiting its own timeout.
  MemoryStore store;
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
  std::chrono::steady_clock::duration second{};
  store.set("u/first/1", toBytes("late"));
  const auto start = std::chrono::steady_clock::now();
  const Bootstrap bootstrap = Bootstrap(store, "u", 0, 2, 10s).until(start + 300ms);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(bootstrap.allGather("first", "x")[1], "late");
  const auto before = std::chrono::steady_clock::now();
  message = messageOf([&] { bootstrap.allGather("second", "x"); }, &kind);
  second = std::chrono::steady_clock::now() - before;
  EXPECT_EQ(kind, ErrorKind::kTimeout);
  EXPECT_NE(message.find("ranks [1]"), std::string::npos) << message;
  EXPECT_LT(second, 2s);
}

TEST(Bootstrap, BroadcastGivesEveryRankTheRootsValue) {
  constexpr int kRanks = 4;
  MemoryStore store;
  std::vector<std::string> seen(kRanks);
  testing::runThreads(kRanks, [&](int rank) {
    const Bootstrap bootstrap(store, "b", rank, kRanks, 10s);
    seen[rank] = toString(bootstrap.broadcast("name", 2, toBytes(rank == 2 ? "root's" : "other")));
  });
  EXPECT_EQ(seen, std::vector<std::string>(kRanks, "root's"));
}

TEST(Bootstrap, BroadcastTimesOutNamingTheRoot) {
  MemoryStore store;
  ErrorKind kind = ErrorKind::kInternal;
  const std::string message =
      messageOf([&] { Bootstrap(store, "b", 0, 3, 100ms).broadcast("name", 1, {}); }, &kind);
  EXPECT_EQ(kind, ErrorKind::kTimeout);
  EXPECT_NE(message.find("ranks [1]"), std::string::npos) << message;
}

TEST(Bootstrap, AgreeWithOneFailingRankFailsEveryRankAlike) {
  constexpr int kRanks = 4;
  MemoryStore store;
  std::vector<Agreement> agreements(kRanks);
  testing::runThreads(kRanks, [&](int rank) {
    const Bootstrap bootstrap(store, "a", rank, kRanks, 10s);
    agreements[rank] = bootstrap.agree("mapped", rank == 2 ? "cannot map" : "");
  });
  for (const Agreement& agreement : agreements) {
    EXPECT_FALSE(agreement.ok());
    EXPECT_EQ(agreement.first(), "rank 2: cannot map");
    EXPECT_EQ(agreement.all(), "rank 2: cannot map");
  }
}

TEST(Bootstrap, AgreeNamesTheFirstFailureAndGroupsThemAll) {
  constexpr int kRanks = 5;
  MemoryStore store;
  std::vector<Agreement> agreements(kRanks);
  testing::runThreads(kRanks, [&](int rank) {
    const std::string failure = rank == 1 || rank == 3 ? "no peer access to rank 0"
                                : rank == 2            ? "out of memory"
                                                       : "";
    agreements[rank] = Bootstrap(store, "a", rank, kRanks, 10s).agree("votes", failure);
  });
  for (const Agreement& agreement : agreements) {
    EXPECT_EQ(agreement.first(), "rank 1: no peer access to rank 0");
    EXPECT_EQ(agreement.all(), "ranks 1,3: no peer access to rank 0; rank 2: out of memory");
  }
}

TEST(Bootstrap, AgreeWithoutFailuresProceedsEverywhere) {
  MemoryStore store;
  std::vector<int> ok(3, 0);
  testing::runThreads(3, [&](int rank) {
    const Agreement agreement = Bootstrap(store, "a", rank, 3, 10s).agree("fine", "");
    ok[rank] = agreement.ok() && agreement.first().empty() && agreement.all().empty();
  });
  EXPECT_EQ(ok, std::vector<int>(3, 1));
}

TEST(Bootstrap, FreshScopesNeverReadAnEarlierAttempt) {
  // What retries rely on: attempt 0 said no; attempt 1, under its own scope, says yes.
  MemoryStore store;
  std::vector<std::string> first(3), second(3, "unset");
  testing::runThreads(3, [&](int rank) {
    const Bootstrap group(store, "ws", rank, 3, 10s);
    first[rank] = group.scoped("0").agree("votes", rank == 2 ? "cannot map" : "").first();
    second[rank] = group.scoped("1").agree("votes", "").first();
  });
  EXPECT_EQ(first, std::vector<std::string>(3, "rank 2: cannot map"));
  EXPECT_EQ(second, std::vector<std::string>(3, ""));
  EXPECT_EQ(toString(store.get("ws/0/votes/2", 1ms)), "cannot map");
}

TEST(Bootstrap, BadRanksAreInvalidArguments) {
  MemoryStore store;
  EXPECT_EQ(testing::errorKindOf([&] { Bootstrap(store, "x", 2, 2, 1s); }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(testing::errorKindOf([&] { Bootstrap(store, "x", 0, 0, 1s); }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(testing::errorKindOf([&] { Bootstrap(store, "x", 0, 2, 1s).broadcast("k", 2, {}); }),
            ErrorKind::kInvalidArgument);
}

TEST(RandomToken, DiffersBetweenCalls) {
  // Two equal 64-bit draws: once in 2^64 runs.
  EXPECT_NE(randomToken(), randomToken());
}

TEST(Hosts, GroupsRanksInOrderOfEachHostsLowestRank) {
  const Hosts hosts = Hosts::of({"b", "a", "b", "c", "a"});
  EXPECT_EQ(hosts.count(), 3);
  EXPECT_EQ(hosts.identities, (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(hosts.hostOf, (std::vector<int>{0, 1, 0, 2, 1}));
  EXPECT_EQ(hosts.ranksOn(1), (std::vector<int>{1, 4}));
  EXPECT_EQ(hosts.leaders(), (std::vector<int>{0, 1, 3}));
}

TEST(Hosts, CensusNamesTheFirstRankThatDoesNotTakePart) {
  MemoryStore store;
  std::vector<Census> censuses(4);
  testing::runThreads(4, [&](int rank) {
    const Bootstrap bootstrap(store, "c", rank, 4, 10s);
    censuses[rank] = takeCensus(bootstrap, "hosts", rank < 2 ? "h0" : "h1", rank != 3);
  });
  for (const Census& census : censuses) {
    EXPECT_EQ(census.firstAbsent, 3);
    EXPECT_EQ(census.hosts.hostOf, (std::vector<int>{0, 0, 1, 1}));
  }
}

// The group's layout: one census answers where every rank is, on every rank alike.
TEST(GroupLayout, OneCensusSaysWhereEveryRankIs) {
  MemoryStore store;
  std::vector<GroupLayout> layouts(4);
  testing::runThreads(4, [&](int rank) {
    shm::Options options;
    options.hostIdentity = rank % 2 == 0 ? "h0" : "h1";
    const Bootstrap bootstrap(store, "layout", rank, 4, 10s);
    layouts[rank] =
        GroupLayout::of(rank, options,
                        takeCensus(bootstrap, "hosts", options.identity(), !options.disabled));
  });
  for (int rank = 0; rank < 4; ++rank) {
    const GroupLayout& layout = layouts[rank];
    EXPECT_EQ(layout.size, 4);
    EXPECT_EQ(layout.hosts(), 2);
    EXPECT_EQ(layout.host(), rank % 2);
    EXPECT_EQ(layout.identity(), rank % 2 == 0 ? "h0" : "h1");
    EXPECT_EQ(layout.ranksOnThisHost(),
              rank % 2 == 0 ? (std::vector<int>{0, 2}) : (std::vector<int>{1, 3}));
    EXPECT_FALSE(layout.shmDisabled());
  }
  // take(): the same exchange with this process's own identity (one host here); a group of one
  // asks nobody, and still knows its host.
  MemoryStore group;
  std::vector<GroupLayout> taken(3);
  testing::runThreads(3,
                      [&](int rank) { taken[rank] = GroupLayout::take(group, rank, 3, "l", 10s); });
  for (const GroupLayout& layout : taken) {
    EXPECT_EQ(layout.hosts(), 1);
    EXPECT_EQ(layout.ranksOnThisHost(), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(layout.identity(), layout.shm.identity());
  }
  MemoryStore nobody;
  const GroupLayout alone = GroupLayout::take(nobody, 0, 1, "l", 10s);
  EXPECT_EQ(alone.ranksOnThisHost(), (std::vector<int>{0}));
  EXPECT_EQ(alone.identity(), alone.shm.identity());
  ErrorKind kind = ErrorKind::kInternal;
  messageOf([&] { nobody.get("l/hosts/0", 1ms); }, &kind);
  EXPECT_EQ(kind, ErrorKind::kTimeout) << "a group of one published a census";
}

}  // namespace
}  // namespace xccl::net
