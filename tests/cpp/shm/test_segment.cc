// The segment (net/regions/shm/segment.h), ranks as threads: creation and early unlink, slot
// sizing, the group-wide "unavailable" answer, and the bounded, liveness-aware waits.
#include <sys/statvfs.h>

#include <atomic>
#include <cstring>
#include <ctime>
#include <optional>

#include "algo_testing.h"
#include "shm_testing.h"
#include "topo/host.h"

namespace xccl {
namespace {

using namespace std::chrono_literals;
using net::shm::Segment;
using testing::shmOptions;
using testing::throwsError;

// Runs body(rank, options) on `size` threads over one MemoryStore; each rank's create() result
// and reason are returned.
struct Created {
  std::vector<std::unique_ptr<Segment>> segments;
  std::vector<std::string> reasons;
};
Created createAll(int size, const std::function<net::shm::Options(int)>& optionsFor) {
  net::MemoryStore store;
  Created created;
  created.segments.resize(size);
  created.reasons.resize(size);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      created.segments[rank] =
          Segment::create(store, rank, size, optionsFor(rank), &created.reasons[rank]);
    });
  }
  for (auto& t : threads) t.join();
  return created;
}

size_t devShmFreeBytes() {
  struct statvfs fs{};
  EXPECT_EQ(::statvfs("/dev/shm", &fs), 0);
  return static_cast<size_t>(fs.f_bavail) * fs.f_frsize;
}

TEST(Segment, EveryRankMapsOneSegmentWhoseNameIsGoneAfterSetup) {
  Created created = createAll(3, [](int) { return shmOptions(5000); });
  for (int r = 0; r < 3; ++r) {
    ASSERT_NE(created.segments[r], nullptr) << created.reasons[r];
    EXPECT_EQ(created.segments[r]->name(), created.segments[0]->name());
    EXPECT_EQ(created.segments[r]->slotBytes(), 8192u) << "rounded up to whole pages";
    EXPECT_EQ(created.segments[r]->rank(), r);
    EXPECT_EQ(created.segments[r]->size(), 3);
  }
  const std::string& name = created.segments[0]->name();
  EXPECT_EQ(name.rfind(net::shm::kNamePrefix + std::to_string(::getpid()) + "-", 0), 0u) << name;
  // Unlinked while the group is alive: a crash from now on leaves nothing in /dev/shm.
  EXPECT_FALSE(testing::shmNameExists(name)) << name;
  EXPECT_TRUE(testing::xcclShmNamesFrom(::getpid()).empty());
  // The ranks really share the memory: what rank 1 writes, rank 2 reads.
  const uint32_t step = 7;
  std::memcpy(created.segments[1]->slot(1, step), "hello", 6);
  EXPECT_STREQ(reinterpret_cast<const char*>(created.segments[2]->slot(1, step)), "hello");
  EXPECT_NE(created.segments[2]->slot(1, step), created.segments[2]->slot(1, step + 1))
      << "consecutive steps use different slots";
}

TEST(Segment, DefaultSlotSizeAdaptsToDevShm) {
  Created created = createAll(2, [](int) { return shmOptions(0); });
  ASSERT_NE(created.segments[0], nullptr) << created.reasons[0];
  const size_t slot = created.segments[0]->slotBytes();
  EXPECT_LE(slot, net::shm::kDefaultSlotBytes);
  EXPECT_GE(slot, net::shm::kMinAdaptiveSlotBytes);
  EXPECT_EQ(slot & (slot - 1), 0u) << "halved from the default: a power of two";
  if (devShmFreeBytes() > (size_t{1} << 30)) {
    EXPECT_EQ(slot, net::shm::kDefaultSlotBytes);
  }
  EXPECT_GE(created.segments[0]->totalBytes(), 2 * 2 * slot);
}

TEST(Segment, TooLargeForDevShmIsUnavailableOnEveryRank) {
  Created created = createAll(3, [](int) { return shmOptions(size_t{1} << 46); });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(created.segments[r], nullptr);
    EXPECT_NE(created.reasons[r].find("/dev/shm"), std::string::npos) << created.reasons[r];
    EXPECT_NE(created.reasons[r].find("free"), std::string::npos) << created.reasons[r];
  }
  EXPECT_TRUE(testing::xcclShmNamesFrom(::getpid()).empty());
}

TEST(Segment, RanksOnDifferentHostsAreUnavailable) {
  Created created = createAll(3, [](int rank) {
    net::shm::Options options = shmOptions(4096);
    options.hostIdentity = rank == 2 ? "other-host boot-b" : "this-host boot-a";
    return options;
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(created.segments[r], nullptr);
    EXPECT_NE(created.reasons[r].find("ranks 0 and 2 are on different hosts"), std::string::npos)
        << created.reasons[r];
  }
}

TEST(Segment, DisabledOnOneRankIsUnavailableOnEveryRank) {
  Created created = createAll(3, [](int rank) {
    net::shm::Options options = shmOptions(4096);
    options.disabled = rank == 1;
    return options;
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(created.segments[r], nullptr);
    EXPECT_NE(created.reasons[r].find("XCCL_SHM_DISABLE is set on rank 1"), std::string::npos)
        << created.reasons[r];
  }
}

TEST(Segment, AllOnOneHost) {
  net::MemoryStore store;
  std::vector<int> same(3), mixed(3);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] {
      same[rank] = net::shm::allOnOneHost(store, rank, 3, 10s, "a");
      mixed[rank] = net::shm::allOnOneHost(store, rank, 3, 10s, "b", rank == 0 ? "x 1" : "x 2");
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(same, std::vector<int>(3, 1));
  EXPECT_EQ(mixed, std::vector<int>(3, 0));
  EXPECT_NE(topo::hostIdentity().find(' '), std::string::npos);
  EXPECT_GT(topo::hostIdentity().size(), 10u) << "hostname and boot id";
}

// A store through which one rank "dies" after the host vote: it never learns the segment's
// name, so the others wait for its mapping vote until their timeout.
class DiesBeforeMapping : public net::Store {
 public:
  explicit DiesBeforeMapping(net::Store& inner) : inner_(inner) {}
  void set(const std::string& key, const net::Bytes& value) override { inner_.set(key, value); }
  net::Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    if (key.size() >= 5 && key.compare(key.size() - 5, 5, "/name") == 0) {
      XCCL_THROW(ErrorKind::kPeerFailure, "simulated death");
    }
    return inner_.get(key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override { return inner_.add(key, delta); }

 private:
  net::Store& inner_;
};

TEST(Segment, PeerDyingDuringSetupTimesOutTheOthersAndLeavesNoName) {
  net::MemoryStore store;
  DiesBeforeMapping dying(store);
  std::vector<std::optional<Error>> errors(3);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 3; ++rank) {
    threads.emplace_back([&, rank] {
      errors[rank] = testing::errorFrom([&] {
        std::string why;
        Segment::create(rank == 2 ? static_cast<net::Store&>(dying) : store, rank, 3,
                        shmOptions(4096, 300ms), &why);
      });
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(errors[r].has_value()) << "rank " << r;
    EXPECT_EQ(errors[r]->kind(), ErrorKind::kTimeout) << errors[r]->what();
  }
  ASSERT_TRUE(errors[2].has_value());
  // Rank 0 had created the segment before the others gave up, and unlinked it on the way out.
  const std::string published = net::toString(store.get("shm/name", 0ms));
  ASSERT_EQ(published[0], '+') << published;
  EXPECT_FALSE(testing::shmNameExists(published.substr(published.find(' ') + 1))) << published;
  EXPECT_TRUE(testing::xcclShmNamesFrom(::getpid()).empty());
}

TEST(Segment, OptionsFromEnvironmentDefaults) {
  if (std::getenv("XCCL_SHM_SLOT_BYTES") || std::getenv("XCCL_SHM_DISABLE")) GTEST_SKIP();
  net::shm::Options options = net::shm::Options::fromEnvironment();
  EXPECT_EQ(options.slotBytes, 0u);
  EXPECT_FALSE(options.disabled);
}

// ---------------------------------------------------------------------------------------------
// Waits: bounded by the deadline, ended by a dead peer, and the segment refuses work afterwards.

TEST(SegmentWait, MissingRankTimesOutAtTheDeadlineNamingIt) {
  testing::Latch done(3);
  testing::runShmRanks(3, 4096, [&](int rank, Segment& segment) {
    if (rank != 2) {  // rank 2 is in the group but never enters the barrier
      testing::ShmCalls calls(segment, {}, nullptr, 400ms);
      const auto start = net::Clock::now();
      auto barrier = [&] { algo::shm::barrier(calls.next("barrier")); };
      EXPECT_TRUE(throwsError(ErrorKind::kTimeout, barrier,
                              "barrier #1 timed out in shared memory; no signal from rank(s) [2]"));
      const auto waited = net::Clock::now() - start;
      EXPECT_GE(waited, 390ms);
      EXPECT_LT(waited, 5s);
      EXPECT_TRUE(throwsError(ErrorKind::kAborted, barrier, "unusable after an earlier failure"));
    }
    done.arriveAndWait();
  });
}

TEST(SegmentWait, DeadPeerEndsTheWaitPromptlyNamingIt) {
  std::atomic<bool> rank2Dead{false};
  testing::Latch done(3);
  testing::runShmRanks(3, 4096, [&](int rank, Segment& segment) {
    if (rank == 2) {
      std::this_thread::sleep_for(100ms);
      rank2Dead = true;  // "dies" without entering the collective
    } else {
      auto alive = [&](int peer) { return !(peer == 2 && rank2Dead); };
      testing::ShmCalls calls(segment, {}, alive, 60s);
      std::vector<float> data(100, 1.0f);
      const auto start = net::Clock::now();
      auto allReduce = [&] {
        algo::shm::allReduce(calls.next("allreduce"), data.data(), data.size(), DataType::kFloat32,
                             ReduceOp::kSum);
      };
      EXPECT_TRUE(throwsError(ErrorKind::kPeerFailure, allReduce, "allreduce #1: rank 2 failed"));
      EXPECT_LT(net::Clock::now() - start, 2s) << "long before the 60 s deadline";
    }
    done.arriveAndWait();
  });
}

// A peer that claims to run forever (it stamps `runningAt` without ever arriving: a stuck or
// hostile peer) costs a waiter at most one spin budget: the wait sleeps after it and times out at
// its deadline, having used a small part of the time on a CPU.
TEST(SegmentWait, APeerThatStampsButNeverArrivesDoesNotKeepTheWaiterSpinning) {
  std::atomic<bool> stop{false}, stamping{false};
  testing::Latch done(2);
  testing::runShmRanks(2, 4096, [&](int rank, Segment& segment) {
    if (rank == 1) {
      while (!stop) {
        segment.stampRunning(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count());
        stamping = true;
      }
    } else {
      while (!stamping) std::this_thread::yield();
      testing::ShmCalls calls(segment, {}, nullptr, 300ms);
      timespec cpuStart{}, cpuEnd{};
      ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpuStart);
      auto barrier = [&] { algo::shm::barrier(calls.next("barrier")); };
      EXPECT_TRUE(throwsError(ErrorKind::kTimeout, barrier,
                              "barrier #1 timed out in shared memory; no signal from rank(s) [1]"));
      ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpuEnd);
      const double cpuMs =
          (cpuEnd.tv_sec - cpuStart.tv_sec) * 1e3 + (cpuEnd.tv_nsec - cpuStart.tv_nsec) / 1e6;
      // One budget is at most 0.5 ms, and the 60 sleeps' checks cost a few us each.
      EXPECT_LT(cpuMs, 10.0) << "the waiter spun instead of sleeping";
      stop = true;
    }
    done.arriveAndWait();
  });
}

// A rank can leave a collective outside any wait (a single-copy read of a dead peer's memory
// fails): it never reaches its next step, yet its process lives on. The peers waiting for it
// learn from its flag which rank it found failed, long before their deadline. Rank 0 leaves
// blaming rank 2, which entered the barrier like rank 1.
TEST(SegmentWait, PeerThatLeftTheCollectiveNamesTheRankItFoundFailed) {
  testing::Latch done(3);
  testing::runShmRanks(3, 4096, [&](int rank, Segment& segment) {
    if (rank == 0) {
      std::this_thread::sleep_for(100ms);
      segment.blamePeer(2);
      segment.markBroken("reading rank 2's buffer failed");
    } else {
      testing::ShmCalls calls(segment, {}, [](int) { return true; }, 60s);
      const auto start = net::Clock::now();
      auto barrier = [&] { algo::shm::barrier(calls.next("barrier")); };
      EXPECT_TRUE(throwsError(ErrorKind::kPeerFailure, barrier,
                              "barrier #1: rank 2 failed (rank 0 found it so and left the "
                              "collective) while rank " +
                                  std::to_string(rank) + " waited for rank 0"));
      EXPECT_LT(net::Clock::now() - start, 5s) << "long before the 60 s deadline";
    }
    done.arriveAndWait();
  });
}

// Without a peer to blame (or with a rank out of range) the rank that left names itself.
TEST(SegmentWait, PeerThatLeftWithoutBlamingAnotherIsNamed) {
  testing::Latch done(2);
  testing::runShmRanks(2, 4096, [&](int rank, Segment& segment) {
    if (rank == 0) {
      std::this_thread::sleep_for(100ms);
      segment.blamePeer(99);
      segment.markBroken("a local failure");
    } else {
      testing::ShmCalls calls(segment, {}, [](int) { return true; }, 60s);
      auto barrier = [&] { algo::shm::barrier(calls.next("barrier")); };
      EXPECT_TRUE(throwsError(ErrorKind::kPeerFailure, barrier,
                              "barrier #1: rank 0 failed (its collective failed there) while "
                              "rank 1 waited for it"));
    }
    done.arriveAndWait();
  });
}

// A rank that published its last step and exited is no failure for a peer still waiting for
// somebody else in that step (the end of every job: ranks leave their last collective at
// different times). Rank 1 sends its part of a reduce to rank 0 and "exits"; rank 2 is late.
TEST(SegmentWait, PeerThatFinishedItsPartAndExitedIsNoFailure) {
  std::atomic<bool> rank1Gone{false};
  testing::Latch done(3);
  testing::runShmRanks(3, 4096, [&](int rank, Segment& segment) {
    auto alive = [&](int peer) { return !(peer == 1 && rank1Gone); };
    testing::ShmCalls calls(segment, {}, alive, 20s);
    std::vector<float> data(100, static_cast<float>(rank + 1));
    if (rank == 2) std::this_thread::sleep_for(150ms);
    try {
      algo::shm::reduce(calls.next("reduce"), data.data(), data.size(), DataType::kFloat32,
                        ReduceOp::kSum, /*root=*/0);
    } catch (const Error& e) {
      ADD_FAILURE() << "rank " << rank << ": " << e.what();
    }
    if (rank == 1) rank1Gone = true;
    if (rank == 0) {
      EXPECT_EQ(data[99], 6.0f);
    }
    done.arriveAndWait();
  });
}

TEST(SegmentWait, LivenessCallbackMayEndTheWaitWithItsOwnError) {
  testing::Latch done(2);
  testing::runShmRanks(2, 4096, [&](int rank, Segment& segment) {
    if (rank == 0) {
      testing::ShmCalls calls(segment, {}, [](int) -> bool {
        XCCL_THROW(ErrorKind::kAborted, "the group was aborted");
      });
      auto barrier = [&] { algo::shm::barrier(calls.next("barrier")); };
      EXPECT_TRUE(throwsError(ErrorKind::kAborted, barrier, "the group was aborted"));
    }
    done.arriveAndWait();
  });
}

}  // namespace
}  // namespace xccl
