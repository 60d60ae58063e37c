// Reconfigure handles and rendezvous (net/rendezvous/membership.h), with members as threads over a
// MemoryStore.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/error.h"
#include "net/rendezvous/membership.h"
#include "net/rendezvous/store.h"
#include "threads.h"

namespace xccl::net {
namespace {

using namespace std::chrono_literals;
using testing::errorKindOf;

std::string handleOf(const std::string& job, int i) {
  return MemberHandle{job, "10" + std::to_string(i) + "-00ff", "host a b"}.format();
}

TEST(MemberHandle, RoundTripsAndRejectsMalformed) {
  const MemberHandle handle{"0123abcd", "42-deadbeef", "node-1 1f2e-3d"};
  const MemberHandle back = MemberHandle::parse(handle.format());
  EXPECT_EQ(back.job, handle.job);
  EXPECT_EQ(back.member, handle.member);
  EXPECT_EQ(back.host, handle.host);
  for (const std::string bad :
       {"", "gloo:1:2:1:127.0.0.1:29556", "xccl:1:", "xccl:1:abc", "xccl:1:abc:12-ff",
        "xccl:1:abc:12-ff:", "xccl:1:XYZ:12-ff:h", "xccl:1:abc:12_ff:h", "xccl:1:abc:1-f:h\nx"}) {
    EXPECT_EQ(errorKindOf([&] { MemberHandle::parse(bad); }), ErrorKind::kInvalidArgument) << bad;
  }
}

TEST(JobToken, FirstCallerDrawsEveryLaterCallerReadsIt) {
  MemoryStore store;
  std::vector<std::string> tokens(4);
  testing::runThreads(4, [&](int r) { tokens[r] = jobToken(store, "job", 5s); });
  for (const auto& token : tokens) EXPECT_EQ(token, tokens[0]);
  EXPECT_EQ(tokens[0].size(), 16u);
  EXPECT_EQ(jobToken(store, "job", 5s), tokens[0]);  // a newcomer on the same store
  MemoryStore other;
  EXPECT_NE(jobToken(other, "job", 5s), tokens[0]);
}

TEST(CheckMembership, RanksByPositionOrSortedAndRefusesBadLists) {
  std::vector<std::string> handles = {handleOf("ab", 2), handleOf("ab", 0), handleOf("ab", 1)};
  std::vector<std::string> copy = handles;
  EXPECT_EQ(checkMembership(copy, /*ordered=*/true, handles[0], "ab"), 0);
  EXPECT_EQ(copy, handles);
  EXPECT_EQ(checkMembership(copy, /*ordered=*/false, handles[0], "ab"), 2);
  EXPECT_EQ(copy[0], handleOf("ab", 0));

  auto refused = [](std::vector<std::string> list, const std::string& mine) {
    return errorKindOf([&] { checkMembership(list, true, mine, "ab"); });
  };
  EXPECT_EQ(refused({}, handles[0]), ErrorKind::kInvalidArgument);
  EXPECT_EQ(refused({handles[1], handles[2]}, handles[0]), ErrorKind::kInvalidArgument);
  EXPECT_EQ(refused({handles[0], handles[0]}, handles[0]), ErrorKind::kInvalidArgument);
  EXPECT_EQ(refused({handles[0], handleOf("cd", 5)}, handles[0]), ErrorKind::kInvalidArgument);
  EXPECT_EQ(refused({handles[0], "gloo:1:2:1:127.0.0.1:29556"}, handles[0]),
            ErrorKind::kInvalidArgument);
}

TEST(Rendezvous, EveryMemberArrivesAndAReusedUuidIsRefused) {
  MemoryStore store;
  const std::vector<std::string> three = {handleOf("ab", 0), handleOf("ab", 1), handleOf("ab", 2)};
  testing::runThreads(3, [&](int r) {
    claimUuid(store, "u7/", 7, three, 5s);
    awaitMembers(store, "u7/", 7, r, three, 5s);
  });
  // The same uuid for another membership: refused before anything would be torn down.
  const std::vector<std::string> two = {three[0], three[1]};
  EXPECT_EQ(errorKindOf([&] { claimUuid(store, "u7/", 7, two, 1s); }), ErrorKind::kInvalidArgument);
  EXPECT_NO_THROW(claimUuid(store, "u7/", 7, three, 1s));  // the same membership may re-read it
}

TEST(Rendezvous, AMemberThatNeverArrivesIsNamedWithItsHandle) {
  MemoryStore store;
  const std::vector<std::string> three = {handleOf("ab", 0), handleOf("ab", 1), handleOf("ab", 2)};
  std::vector<std::string> errors(2);
  const auto began = std::chrono::steady_clock::now();
  testing::runThreads(2, [&](int r) {
    claimUuid(store, "u3/", 3, three, 5s);
    try {
      awaitMembers(store, "u3/", 3, r, three, 200ms);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
      errors[r] = e.what();
    }
  });
  EXPECT_LT(std::chrono::steady_clock::now() - began, 3s);
  for (const auto& error : errors) {
    EXPECT_NE(error.find("rank 2 (handle " + three[2] + ") never arrived"), std::string::npos)
        << error;
    EXPECT_EQ(error.find("rank 1 ("), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace xccl::net
