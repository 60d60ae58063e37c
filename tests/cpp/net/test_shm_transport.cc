// Shared-memory point-to-point transport: matching, chunking through the ring, one-sided
// writes, failures, timeouts, status queries, and no CPU burnt while idle.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>

#include <atomic>
#include <filesystem>

#include "net/transport/shm_rings/transport.h"
#include "one_sided_testing.h"
#include "shm/shm_testing.h"
#include "shm_transport_testing.h"

namespace xccl {
namespace {

using net::MessageTag;
using net::TagSpace;
using testing::p2pTag;
using testing::runShmRanks;
using testing::soon;

TEST(ShmTransport, PingPongAllPairs) {
  for (int size : {2, 3, 4}) {
    runShmRanks(size, [&](int rank, net::Transport& t) {
      EXPECT_STREQ(t.name(), "shm");
      std::vector<int> in(size, -1), out(size, rank * 100);
      std::vector<net::RequestPtr> reqs;
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        reqs.push_back(t.irecv(peer, p2pTag(7), &in[peer], sizeof(int)));
        reqs.push_back(t.isend(peer, p2pTag(7), &out[peer], sizeof(int)));
      }
      t.wait(reqs, soon(), "exchange");
      for (int peer = 0; peer < size; ++peer) {
        if (peer != rank) {
          EXPECT_EQ(in[peer], peer * 100);
        }
      }
    });
  }
}

// 8 MiB is eight times a ring: the frame flows through in pieces, into the posted buffer or
// into an unexpected one that a later receive copies from.
TEST(ShmTransport, LargeMessagesChunkThroughTheRing) {
  const size_t count = (8 << 20) / sizeof(uint32_t);
  runShmRanks(2, [&](int rank, net::Transport& t) {
    std::vector<uint32_t> out(count), early(count, 0), late(count, 0);
    std::iota(out.begin(), out.end(), rank * 7u);
    const int peer = 1 - rank;
    auto r1 = t.irecv(peer, p2pTag(1), early.data(), count * 4);
    auto s1 = t.isend(peer, p2pTag(1), out.data(), count * 4);
    auto s2 = t.isend(peer, p2pTag(2), out.data(), count * 4);
    t.wait({r1, s1, s2}, soon(), "large");
    auto r2 = t.irecv(peer, p2pTag(2), late.data(), count * 4);
    t.wait({r2}, soon(), "late");
    for (size_t i = 0; i < count; i += 4097) {
      ASSERT_EQ(early[i], i + peer * 7u);
      ASSERT_EQ(late[i], i + peer * 7u);
    }
    EXPECT_EQ(late[count - 1], count - 1 + peer * 7u);
  });
}

TEST(ShmTransport, SameTagInOrderAndAnySource) {
  runShmRanks(3, [&](int rank, net::Transport& t) {
    if (rank == 0) {
      int a = -1, b = -1, any = -1;
      auto ra = t.irecv(1, p2pTag(5), &a, sizeof(int));
      auto rb = t.irecv(1, p2pTag(5), &b, sizeof(int));
      t.wait({ra, rb}, soon(), "fifo");
      EXPECT_EQ(a, 10);
      EXPECT_EQ(b, 11);
      auto rany = t.irecv(net::kAnySource, p2pTag(9), &any, sizeof(int));
      t.wait({rany}, soon(), "any");
      EXPECT_EQ(rany->peer(), 2);
      EXPECT_EQ(any, 20);
    } else if (rank == 1) {
      int x = 10, y = 11;
      t.wait({t.isend(0, p2pTag(5), &x, sizeof(int)), t.isend(0, p2pTag(5), &y, sizeof(int))},
             soon(), "s");
    } else {
      int z = 20;
      t.wait({t.isend(0, p2pTag(9), &z, sizeof(int))}, soon(), "s");
    }
  });
}

TEST(ShmTransport, SizeAndCollectiveMismatchesAreErrors) {
  runShmRanks(2, [&](int rank, net::Transport& t) {
    const MessageTag allReduce{TagSpace::kCollective, 0, 4, 111},
        broadcast{TagSpace::kCollective, 0, 4, 222};
    if (rank == 0) {
      int64_t big = 1;
      int32_t x = 0;
      t.wait({t.isend(1, p2pTag(3), &big, sizeof(big)), t.isend(1, broadcast, &x, sizeof(x))},
             soon(), "send");
      return;
    }
    int32_t small = 0, y = 0;
    auto r = t.irecv(0, p2pTag(3), &small, sizeof(small));
    auto c = t.irecv(0, allReduce, &y, sizeof(y));
    for (const auto& request : {r, c}) {
      try {
        t.wait({request}, soon(), "recv");
        ADD_FAILURE() << "mismatch not detected";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kPeerFailure);
        const std::string text = e.what();
        EXPECT_TRUE(text.find("sent 8 bytes") != std::string::npos ||
                    text.find("different collectives") != std::string::npos)
            << text;
      }
    }
  });
}

TEST(ShmTransport, TimeoutNamesTheSilentRankAndStatusIsAnswered) {
  std::atomic<bool> released{false};
  runShmRanks(3, [&](int rank, net::Transport& t) {
    t.setStatusProvider([rank] { return "rank " + std::to_string(rank) + " busy"; });
    if (rank != 0) {  // alive but silent after this; its progress thread still answers
      t.wait({t.isend(0, p2pTag(2), nullptr, 0)}, soon(), "provider set");
      while (!released.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    t.wait({t.irecv(1, p2pTag(2), nullptr, 0), t.irecv(2, p2pTag(2), nullptr, 0)}, soon(), "set");
    int a, b;
    auto r1 = t.irecv(1, p2pTag(1), &a, sizeof(int));
    auto r2 = t.irecv(2, p2pTag(1), &b, sizeof(int));
    try {
      t.wait({r1, r2}, soon(200), "allreduce #4");
      ADD_FAILURE() << "no timeout";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
      EXPECT_NE(std::string(e.what()).find("[1, 2]"), std::string::npos) << e.what();
    }
    const auto replies = t.queryStatus(soon(2000));
    released = true;
    EXPECT_EQ(replies[0], "rank 0 busy");
    EXPECT_EQ(replies[1], "rank 1 busy");
    EXPECT_EQ(replies[2], "rank 2 busy");
  });
}

TEST(ShmTransport, AbortReachesPeers) {
  runShmRanks(3, [&](int rank, net::Transport& t) {
    if (rank == 2) {
      t.abort("rank 2 gave up");
      std::string why;
      EXPECT_TRUE(t.peerFailed(0, &why));
      return;
    }
    int x = 0;
    auto r = t.irecv(2, MessageTag{TagSpace::kCollective, 0, 1, 0}, &x, sizeof(x));
    try {
      t.wait({r}, soon(), "allreduce #1");
      ADD_FAILURE() << "abort did not reach rank " << rank;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kPeerFailure);
      EXPECT_NE(std::string(e.what()).find("rank 2 gave up"), std::string::npos) << e.what();
    }
    std::string why;
    EXPECT_TRUE(t.peerFailed(2, &why));
    EXPECT_FALSE(t.peerFailed(1 - rank, nullptr));
  });
}

// The one-sided contract shared with the other transports (one_sided_testing.h).
TEST(ShmTransport, OneSidedWrites) {
  for (int size : {2, 3}) {
    runShmRanks(size, [&](int rank, net::Transport& t) {
      testing::checkOneSidedWrites(rank, size, t, {});
    });
  }
}

// The target deregisters while a write streams through the ring (one_sided_testing.h).
TEST(ShmTransport, DeregisteringDuringAWriteWaitsForItsCopy) {
  runShmRanks(2, [&](int rank, net::Transport& t) {
    testing::checkDeregistrationDuringWrite(rank, t);
  });
}

double threadCpuSeconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Four ranks idle for half a second: their progress threads sleep on futexes. A spinning one
// would burn ~0.5 s of CPU per thread (or the whole 2 s on 2 cores).
TEST(ShmTransport, IdleTransportsBurnNoCpu) {
  net::MemoryStore store;
  std::vector<std::unique_ptr<net::Transport>> ts(4);
  testing::runThreads(4, [&](int rank) { ts[rank] = testing::makeShm(store, rank, 4); });
  const double before = testing::processCpuSeconds();
  const double mine = threadCpuSeconds(CLOCK_THREAD_CPUTIME_ID);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double used =
      testing::processCpuSeconds() - before - (threadCpuSeconds(CLOCK_THREAD_CPUTIME_ID) - mine);
  EXPECT_LT(used, 0.05) << used * 1000 << " ms of CPU in 0.5 s idle: spinning?";
}

// A peer process SIGKILLed: the survivor's pending receive fails naming it, well before its
// timeout, and peerFailed says so.
TEST(ShmTransport, KilledPeerProcessIsNamed) {
  std::string dir = (std::filesystem::temp_directory_path() / "xccl-p2p-test-XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    int code = 0;
    try {
      testing::FileStore store(dir);
      auto t = testing::makeShm(store, 1, 2);
      int x = 5;
      t->wait({t->isend(0, p2pTag(1), &x, sizeof(x))}, soon(), "send");
      ::pause();  // killed here
    } catch (...) {
      code = 98;
    }
    ::_exit(code);
  }
  testing::FileStore store(dir);
  auto t = testing::makeShm(store, 0, 2);
  int x = 0, y = 0;
  t->wait({t->irecv(1, p2pTag(1), &x, sizeof(x))}, soon(), "first");
  EXPECT_EQ(x, 5);
  auto pending = t->irecv(1, p2pTag(2), &y, sizeof(y));
  ::kill(child, SIGKILL);
  const auto killed = net::Clock::now();
  try {
    t->wait({pending}, soon(20000), "recv #2");
    ADD_FAILURE() << "no failure";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPeerFailure);
    EXPECT_NE(std::string(e.what()).find("rank 1 exited"), std::string::npos) << e.what();
  }
  EXPECT_LT(net::Clock::now() - killed, std::chrono::seconds(2));
  std::string why;
  EXPECT_TRUE(t->peerFailed(1, &why));
  EXPECT_NE(why.find("rank 1"), std::string::npos);
  ::waitpid(child, nullptr, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace xccl
