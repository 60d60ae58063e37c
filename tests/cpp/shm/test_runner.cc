// algo::Runner over a group with both transports (ranks as threads, real TCP over loopback and
// one shm segment): it runs each collective where planCpu() says, and the TCP transport's
// peerFailed() ends shared-memory waits for a peer whose connection closed or that aborted.
#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <numeric>

#include "algo/runner.h"
#include "algo/test_hooks.h"
#include "algo/tuning.h"
#include "algo_testing.h"
#include "shm_testing.h"

namespace xccl {
namespace {

using namespace std::chrono_literals;
using algo::Algorithm;

// Each rank's TCP transport and segment, built through one store.
struct Member {
  std::unique_ptr<net::tcp::TcpTransport>& tcp;
  std::unique_ptr<net::shm::Segment> segment;
};

void runMembers(int world, const std::function<void(int, Member&)>& body) {
  testing::runTcpRanks(world, [&](int rank, net::Store& store,
                                  std::unique_ptr<net::tcp::TcpTransport>& tcp) {
    std::string why;
    Member m{tcp, net::shm::Segment::create(store, rank, world, testing::shmOptions(4096), &why)};
    if (!m.segment) XCCL_THROW(ErrorKind::kInternal, "shared memory unavailable: ", why);
    body(rank, m);
  });
}

algo::Runner runnerFor(Member& m, uint64_t seq, Algorithm forced, bool withSegment,
                       std::chrono::milliseconds timeout = 30s,
                       const algo::TuningTable* tuning = nullptr) {
  algo::Tunables tunables;
  tunables.forced = forced;
  algo::Context tcp{*m.tcp, seq, "op #" + std::to_string(seq), net::Clock::now() + timeout,
                    tunables};
  const int size = m.tcp->size();
  const algo::GroupShape shape = withSegment
                                     ? algo::GroupShape{size, algo::Locality::kOneHost, 1, size}
                                     : algo::GroupShape{size};
  return {
      tcp,  withSegment ? m.segment.get() : nullptr, testing::aliveFrom(*m.tcp), nullptr, tuning,
      shape};
}

// The injections this build can make (algo/test_hooks.h): with the test hooks, damage to ring
// and to shm results; without them (a build configured with XCCL_TEST_HOOKS=OFF) none, and the
// test below checks the tuned plan alone.
#if XCCL_TEST_HOOKS
constexpr Algorithm kInjections[] = {Algorithm::kAuto, Algorithm::kRing, Algorithm::kShm};
void inject(Algorithm algorithm) { algo::injectWrongResult(algorithm); }
#else
constexpr Algorithm kInjections[] = {Algorithm::kAuto};
void inject(Algorithm) {}
#endif

// A tuned plan runs where its entry says, with the entry's ring chunk in the context the
// executors read; and _C._inject_wrong_result's damage hits exactly the named algorithm's output.
TEST(Runner, RunsTheTunedPlanWithItsChunkAndInjectedDamageHitsOnlyItsAlgorithm) {
  constexpr int kWorld = 3;
  const algo::TuningTable table = algo::parseTuningTable(
      "xccl-tuning 1\nworld 3 1 one_host\ncpu all_reduce 0 inf tcp ring 8192 1 2\n");
  for (Algorithm injected : kInjections) {
    inject(injected);
    runMembers(kWorld, [&](int rank, Member& m) {
      uint64_t seq = 0;
      const algo::Runner runner = runnerFor(m, ++seq, Algorithm::kAuto, true, 30s, &table);
      const algo::CpuPlan plan = runner.plan(algo::Collective::kAllReduce, 20000);
      EXPECT_EQ(plan.tuned, &table.cpu[0]);
      EXPECT_EQ(runner.netContext(plan).tunables.ringChunkBytes, 8192u);
      EXPECT_EQ(runner.net.tunables.ringChunkBytes, algo::kRingChunkBytes);
      std::vector<int32_t> data(5000);
      std::iota(data.begin(), data.end(), rank);
      const uint32_t before = m.segment->step();
      algo::allReduce(runner, data.data(), data.size(), DataType::kInt32, ReduceOp::kSum);
      EXPECT_EQ(m.segment->step(), before) << "tuned to TCP: the segment stays idle";
      const int32_t wrong = injected == Algorithm::kRing ? 1 : 0;
      EXPECT_EQ(data[0], 3 + wrong) << algo::algorithmName(injected);
      for (size_t i = 1; i < data.size(); ++i) {
        ASSERT_EQ(data[i], static_cast<int32_t>(kWorld * i + 3)) << "element " << i;
      }
      // broadcast over the segment (kShm): damaged only when shm is named.
      std::vector<uint8_t> bytes(100, static_cast<uint8_t>(rank == 0 ? 7 : 0));
      algo::broadcast(runnerFor(m, ++seq, Algorithm::kAuto, true, 30s, &table), bytes.data(),
                      bytes.size(), 0);
      EXPECT_EQ(bytes[0], injected == Algorithm::kShm ? 8 : 7);
      EXPECT_EQ(bytes[99], 7);
    });
  }
  inject(Algorithm::kAuto);
}

TEST(Runner, RunsEachCollectiveWhereSelectSays) {
  constexpr int kWorld = 3;
  runMembers(kWorld, [&](int rank, Member& m) {
    uint64_t seq = 0;
    // All four ways: shm available or not, ring forced or not. Only "available and not forced"
    // moves the segment's step counter for all_reduce; all_to_all has no ring, so forcing ring
    // leaves it on shared memory.
    for (bool withSegment : {true, false}) {
      for (Algorithm forced : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kShm}) {
        std::vector<int32_t> data(5000);
        std::iota(data.begin(), data.end(), rank);
        const uint32_t before = m.segment->step();
        algo::allReduce(runnerFor(m, ++seq, forced, withSegment), data.data(), data.size(),
                        DataType::kInt32, ReduceOp::kSum);
        for (size_t i = 0; i < data.size(); ++i) {
          ASSERT_EQ(data[i], static_cast<int32_t>(kWorld * i + 3)) << "element " << i;
        }
        const bool shm = withSegment && forced != Algorithm::kRing;
        EXPECT_EQ(m.segment->step() != before, shm)
            << "all_reduce segment=" << withSegment << " forced=" << algo::algorithmName(forced);

        const uint32_t beforeA2a = m.segment->step();
        std::vector<size_t> lengths(kWorld, 8), offsets{0, 8, 16};
        std::vector<uint8_t> in(24, static_cast<uint8_t>(rank)), out(24, 0xff);
        algo::allToAll(runnerFor(m, ++seq, forced, withSegment), in.data(), offsets, lengths,
                       out.data(), offsets, lengths);
        for (int p = 0; p < kWorld; ++p) EXPECT_EQ(out[p * 8], p) << "from rank " << p;
        EXPECT_EQ(m.segment->step() != beforeA2a, withSegment)
            << "all_to_all segment=" << withSegment << " forced=" << algo::algorithmName(forced);
      }
    }
    // Coalesced calls: consecutive sequence numbers, each its own collective on the segment.
    const algo::Runner runner = runnerFor(m, ++seq, Algorithm::kAuto, true);
    ++seq;
    EXPECT_EQ(algo::subCollective(runner, 1).net.seq, runner.net.seq + 1);
    for (size_t i = 0; i < 2; ++i) {
      std::vector<int64_t> value{rank + 10 * static_cast<int64_t>(i)};
      algo::allReduce(algo::subCollective(runner, i), value.data(), 1, DataType::kInt64,
                      ReduceOp::kMax);
      EXPECT_EQ(value[0], kWorld - 1 + 10 * static_cast<int64_t>(i));
    }
  });
}

// A rank whose TCP transport goes away (closed: the process died; or aborted with a reason)
// while the others wait for it in shared memory: they fail long before their deadline, naming
// it, with the transport's reason.
TEST(Runner, ShmWaitsEndWhenTcpSaysThePeerFailed) {
  for (bool abort : {false, true}) {
    constexpr int kWorld = 3, kVictim = 1;
    runMembers(kWorld, [&](int rank, Member& m) {
      if (rank == kVictim) {
        std::this_thread::sleep_for(100ms);  // the others are waiting in shared memory by now
        if (abort) {
          m.tcp->abort("injected fault on rank 1");
        } else {
          m.tcp.reset();  // closes every connection, as a process exit does
        }
        return;
      }
      std::vector<float> data(10000, 1.0f);
      const auto start = net::Clock::now();
      auto error = testing::errorFrom([&] {
        algo::allReduce(runnerFor(m, 1, Algorithm::kAuto, true, 30s), data.data(), data.size(),
                        DataType::kFloat32, ReduceOp::kSum);
      });
      ASSERT_TRUE(error.has_value()) << "rank " << rank;
      EXPECT_EQ(error->kind(), ErrorKind::kPeerFailure) << error->what();
      EXPECT_LT(net::Clock::now() - start, 5s) << error->what();
      const std::string text = error->what();
      EXPECT_NE(text.find("rank 1"), std::string::npos) << text;
      if (abort) {
        EXPECT_NE(text.find("injected fault on rank 1"), std::string::npos) << text;
      }
    });
  }
}

TEST(Runner, PeerFailedIsTrueForEveryPeerAfterAnAbortHere) {
  // Both ranks look at the healthy state before rank 0 aborts: without this, rank 1 could see the
  // abort in its first look (about 1 run in 4 did).
  std::mutex mutex;
  std::condition_variable changed;
  int healthySeen = 0;
  runMembers(2, [&](int rank, Member& m) {
    const int peer = 1 - rank;
    EXPECT_FALSE(m.tcp->peerFailed(peer, nullptr));
    std::string why = "untouched";
    EXPECT_FALSE(m.tcp->peerFailed(peer, &why));
    EXPECT_EQ(why, "untouched");
    {
      std::unique_lock<std::mutex> lock(mutex);
      ++healthySeen;
      changed.notify_all();
      ASSERT_TRUE(changed.wait_for(lock, 10s, [&] { return healthySeen == 2; }));
    }
    if (rank == 0) {
      m.tcp->abort("stopping");
      EXPECT_TRUE(m.tcp->peerFailed(peer, &why));
      EXPECT_NE(why.find("stopping"), std::string::npos) << why;
    } else {
      // The abort frame arrives on the progress thread: wait for it, bounded.
      const auto deadline = net::Clock::now() + 10s;
      while (!m.tcp->peerFailed(peer, &why) && net::Clock::now() < deadline) {
        std::this_thread::sleep_for(1ms);
      }
      EXPECT_NE(why.find("rank 0 aborted"), std::string::npos) << why;
    }
  });
}

// The shape plans are made for, from the group's layout: hosts from its census whatever the
// locality, the ranks sharing this rank's segment once there is one.
TEST(Runner, ShapeOfTheLayout) {
  net::Census census;
  census.hosts = net::Hosts::of({"a", "b", "a", "a"});
  net::GroupLayout layout = net::GroupLayout::of(0, net::shm::Options{}, census);
  algo::GroupShape shape = algo::shapeOf(layout);
  EXPECT_EQ(shape.worldSize, 4);
  EXPECT_EQ(shape.locality, algo::Locality::kNone);
  EXPECT_EQ(shape.hosts, 2);
  EXPECT_EQ(shape.hostRanks, 1);
  layout.locality = algo::Locality::kPerHost;
  EXPECT_EQ(algo::shapeOf(layout).hostRanks, 3);
  EXPECT_EQ(algo::shapeOf(net::GroupLayout::of(1, net::shm::Options{}, census)).hostRanks, 1);
  census.hosts = net::Hosts::of({"a", "a", "a"});
  layout = net::GroupLayout::of(2, net::shm::Options{}, census);
  layout.locality = algo::Locality::kOneHost;
  shape = algo::shapeOf(layout);
  EXPECT_EQ(shape.worldSize, 3);
  EXPECT_EQ(shape.hosts, 1);
  EXPECT_EQ(shape.hostRanks, 3);
}

// A Runner whose shape is not its group's (another size, or a route it has no transport for)
// refuses to plan rather than run a collective its peers plan otherwise.
TEST(Runner, RefusesAShapeThatIsNotItsGroups) {
  runMembers(2, [&](int, Member& m) {
    algo::Runner runner = runnerFor(m, 1, Algorithm::kAuto, true);
    EXPECT_EQ(runner.plan(algo::Collective::kAllReduce, 64).route, algo::CpuRoute::kShm);
    runner.shape.worldSize = 3;
    EXPECT_EQ(testing::errorKindOf([&] { runner.plan(algo::Collective::kAllReduce, 64); }),
              ErrorKind::kInternal);
    algo::Runner noSegment = runnerFor(m, 2, Algorithm::kAuto, true);
    noSegment.segment = nullptr;
    EXPECT_EQ(testing::errorKindOf([&] { noSegment.plan(algo::Collective::kAllReduce, 64); }),
              ErrorKind::kInternal);
  });
}

}  // namespace
}  // namespace xccl
