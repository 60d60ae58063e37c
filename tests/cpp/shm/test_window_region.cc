// net::shm::WindowRegion: ranks as threads over a MemoryStore. Puts are memcpys into a peer's
// mapping; signals must carry them (release/acquire); waits time out naming the peer; no file is
// left in /dev/shm.
#include <dirent.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "net/regions/shm/window_region.h"
#include "threads.h"

namespace xccl::net::shm {
namespace {

using namespace std::chrono_literals;

// This process's window files ("xccl-w<pid>-...", names.h): other tests run beside this one.
int windowFilesInDevShm() {
  const std::string ours = std::string(kNamePrefix) + "w" + std::to_string(::getpid()) + "-";
  int count = 0;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (dirent* entry = ::readdir(dir)) {
      if (std::string(entry->d_name).rfind(ours, 0) == 0) ++count;
    }
    ::closedir(dir);
  }
  return count;
}

TEST(WindowRegion, SignalCarriesEveryPutBeforeIt) {
  constexpr int kSize = 3;
  constexpr int kRounds = 200;
  constexpr size_t kBytes = 4096;
  MemoryStore store;
  PeerAlive alive = [](int) { return true; };
  const int before = windowFilesInDevShm();
  testing::runThreads(kSize, [&](int rank) {
    Bootstrap bootstrap(store, "win", rank, kSize, 10s);
    auto region = WindowRegion::create(bootstrap, {0, 1, 2}, kBytes);
    ASSERT_TRUE(region->maps(0) && region->maps(1) && region->maps(2));
    EXPECT_EQ(region->mapping(rank)->bytes(), kBytes);
    // A token passed around the ring, one more at every hop: rank r reads what prev wrote into
    // r's window right after the wait, and writes it plus one into next's window before
    // signalling next. A value that its signal did not carry shows up as a stale one.
    const int next = (rank + 1) % kSize, prev = (rank + kSize - 1) % kSize;
    const std::string what = "token";
    uint32_t value = 0;
    for (uint32_t round = 0; round < kRounds; ++round) {
      if (rank != 0 || round > 0) {
        region->waitSignal(prev, WaitBounds{Clock::now() + 10s, what, alive});
        std::memcpy(&value, region->mapping(rank)->data() + kBytes - 4, sizeof(value));
        ASSERT_EQ(value, round * kSize + rank) << "rank " << rank;
        EXPECT_FALSE(region->tryConsume(prev));
      }
      const uint32_t out = value + 1;
      std::memcpy(region->mapping(next)->data() + kBytes - 4, &out, sizeof(out));
      region->signal(next);
    }
    if (rank == 0) region->waitSignal(prev, WaitBounds{Clock::now() + 10s, what, alive});
  });
  EXPECT_EQ(windowFilesInDevShm(), before) << "window files left in /dev/shm";
}

TEST(WindowRegion, SignalsCountAndWaitsTimeOutNamingThePeer) {
  MemoryStore store;
  PeerAlive alive = [](int) { return true; };
  testing::runThreads(2, [&](int rank) {
    Bootstrap bootstrap(store, "win", rank, 2, 10s);
    auto region = WindowRegion::create(bootstrap, {0, 1}, 0);
    if (rank == 0) {
      for (int i = 0; i < 3; ++i) region->signal(1);
      region->signal(0);  // to itself
      const std::string what = "self";
      region->waitSignal(0, WaitBounds{Clock::now() + 1s, what, alive});
    } else {
      const std::string what = "wait_signal";
      for (int i = 0; i < 3; ++i)
        region->waitSignal(0, WaitBounds{Clock::now() + 10s, what, alive});
      try {
        region->waitSignal(0, WaitBounds{Clock::now() + 50ms, what, alive});
        ADD_FAILURE() << "a fourth wait must time out";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
        EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
      }
    }
  });
}

TEST(WindowRegion, DeadPeerEndsTheWait) {
  MemoryStore store;
  PeerAlive dead = [](int) { return false; };
  testing::runThreads(2, [&](int rank) {
    Bootstrap bootstrap(store, "win", rank, 2, 10s);
    auto region = WindowRegion::create(bootstrap, {0, 1}, 64);
    if (rank != 1) return;
    const std::string what = "wait_signal";
    const auto began = Clock::now();
    EXPECT_EQ(testing::errorKindOf(
                  [&] { region->waitSignal(0, WaitBounds{Clock::now() + 10s, what, dead}); }),
              ErrorKind::kPeerFailure);
    EXPECT_LT(Clock::now() - began, 1s);
  });
}

TEST(WindowRegion, RanksOfOtherHostsAreNotMapped) {
  MemoryStore store;
  testing::runThreads(3, [&](int rank) {
    Bootstrap bootstrap(store, "win", rank, 3, 10s);
    const std::vector<int> local = rank == 2 ? std::vector<int>{2} : std::vector<int>{0, 1};
    auto region = WindowRegion::create(bootstrap, local, 128);
    EXPECT_TRUE(region->maps(rank));
    EXPECT_EQ(region->maps(2), rank == 2);
    EXPECT_EQ(region->maps(0), rank != 2);
  });
}

}  // namespace
}  // namespace xccl::net::shm
