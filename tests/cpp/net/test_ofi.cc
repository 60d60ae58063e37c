// libfabric transport over tcp;ofi_rxm on loopback: matching, FIFO order, unexpected and large
// messages, mismatched collectives, failures, timeouts, status queries and one-sided writes.
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <numeric>
#include <thread>

#include "net/transport/ofi/cache.h"
#include "net/transport/ofi/fabric.h"
#include "net/transport/ofi/wire.h"
#include "ofi_harness.h"
#include "one_sided_testing.h"

namespace xccl::net::ofi {
namespace {

using testing::errorOf;
using testing::ofiP2p;
using testing::ofiSoon;
using testing::runOfiRanks;
using Ofi = OfiTransport;

constexpr size_t kEager = net::ofi::kEagerBytes;  // larger payloads travel on their own

TEST(Ofi, PingPongAllPairs) {
  for (int size : {2, 3}) {
    runOfiRanks(size, [&](int rank, Ofi& t) {
      EXPECT_EQ(t.provider(), "tcp;ofi_rxm");
      std::vector<int> in(size, -1), out(size, rank * 100);
      std::vector<net::RequestPtr> reqs;
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        reqs.push_back(t.irecv(peer, ofiP2p(7), &in[peer], sizeof(int)));
        reqs.push_back(t.isend(peer, ofiP2p(7), &out[peer], sizeof(int)));
      }
      t.wait(reqs, ofiSoon(), "exchange");
      for (int peer = 0; peer < size; ++peer) {
        if (peer != rank) {
          EXPECT_EQ(in[peer], peer * 100);
        }
      }
    });
  }
}

// 64 MiB, one posted before the data comes (received straight into the buffer) and one after
// (the provider holds it until then); plus sizes around the eager limit and zero bytes.
TEST(Ofi, LargeMessagesBeforeAndAfterPosting) {
  const size_t count = (64 << 20) / sizeof(uint32_t);
  runOfiRanks(2, [&](int rank, Ofi& t) {
    std::vector<uint32_t> out(count), early(count, 0), late(count, 0);
    std::iota(out.begin(), out.end(), rank * 7u);
    const int peer = 1 - rank;
    auto r1 = t.irecv(peer, ofiP2p(1), early.data(), count * 4);
    auto s1 = t.isend(peer, ofiP2p(1), out.data(), count * 4);
    auto s2 = t.isend(peer, ofiP2p(2), out.data(), count * 4);
    t.wait({r1}, ofiSoon(), "early");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto r2 = t.irecv(peer, ofiP2p(2), late.data(), count * 4);
    t.wait({r2, s1, s2}, ofiSoon(), "late");
    for (size_t i = 0; i < count; i += 4097) {
      ASSERT_EQ(early[i], i + peer * 7u);
      ASSERT_EQ(late[i], i + peer * 7u);
    }
    ASSERT_EQ(late[count - 1], count - 1 + peer * 7u);
    for (size_t bytes : {size_t{0}, kEager, kEager + 1, 3 * kEager}) {
      std::vector<uint8_t> src(bytes, static_cast<uint8_t>(rank + 1)), dst(bytes, 0);
      auto s = t.isend(peer, ofiP2p(100 + bytes), src.data(), bytes);
      auto r = t.irecv(peer, ofiP2p(100 + bytes), dst.data(), bytes);
      t.wait({s, r}, ofiSoon(), "sized");
      EXPECT_EQ(dst, std::vector<uint8_t>(bytes, static_cast<uint8_t>(peer + 1))) << bytes;
    }
  });
}

// Sends of up to 16 KiB (header included) are injected: done when isend returns, with the
// buffer free to reuse, no completion waited for. Larger ones still complete the usual way.
TEST(Ofi, SmallSendsAreDoneWhenPosted) {
  runOfiRanks(2, [&](int rank, Ofi& t) {
    const int peer = 1 - rank;
    int warm = rank, got = -1;  // the first send to a peer may wait for its connection
    auto r0 = t.irecv(peer, ofiP2p(1), &got, sizeof(got));
    t.wait({t.isend(peer, ofiP2p(1), &warm, sizeof(warm)), r0}, ofiSoon(), "warm-up");
    const size_t largestInjected = 16384 - sizeof(net::ofi::Header);
    for (size_t bytes : {size_t{4096}, largestInjected, size_t{32768}}) {
      std::vector<uint8_t> out(bytes, static_cast<uint8_t>(rank + 1)), in(bytes, 0);
      auto r = t.irecv(peer, ofiP2p(2 + bytes), in.data(), bytes);
      auto s = t.isend(peer, ofiP2p(2 + bytes), out.data(), bytes);
      if (bytes <= largestInjected) {
        EXPECT_TRUE(s->done()) << bytes << " bytes: not done when isend returned";
      }
      if (s->done()) std::fill(out.begin(), out.end(), uint8_t{0xee});  // sent bytes are copied
      t.wait({s, r}, ofiSoon(), "small");
      EXPECT_EQ(in, std::vector<uint8_t>(bytes, static_cast<uint8_t>(peer + 1))) << bytes;
    }
  });
}

TEST(Ofi, SameTagMatchesInOrderAndAnySource) {
  const size_t small = 1000, large = kEager;  // ints: inline, and a payload of its own
  const size_t counts[6] = {large, small, large, small, small, large};
  runOfiRanks(3, [&](int rank, Ofi& t) {
    if (rank == 0) {
      // Small and large messages with one tag: matched in the order they were sent.
      std::vector<std::vector<int>> got;
      for (int i = 0; i < 6; ++i) got.emplace_back(counts[i], -1);
      std::vector<net::RequestPtr> reqs;
      for (int i = 0; i < 3; ++i)
        reqs.push_back(t.irecv(1, ofiP2p(5), got[i].data(), counts[i] * 4));
      t.wait(reqs, ofiSoon(), "fifo posted");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the rest arrive unexpected
      reqs.clear();
      for (int i = 3; i < 6; ++i)
        reqs.push_back(t.irecv(1, ofiP2p(5), got[i].data(), counts[i] * 4));
      t.wait(reqs, ofiSoon(), "fifo unexpected");
      for (int i = 0; i < 6; ++i) EXPECT_EQ(got[i].back(), 10 + i) << i;
      int any = -1;
      auto rany = t.irecv(net::kAnySource, ofiP2p(9), &any, sizeof(int));
      t.wait({rany}, ofiSoon(), "any");
      EXPECT_EQ(rany->peer(), 2);
      EXPECT_EQ(any, 20);
    } else if (rank == 1) {
      std::vector<std::vector<int>> out;
      std::vector<net::RequestPtr> reqs;
      for (int i = 0; i < 6; ++i) out.emplace_back(counts[i], 10 + i);
      for (int i = 0; i < 6; ++i)
        reqs.push_back(t.isend(0, ofiP2p(5), out[i].data(), counts[i] * 4));
      t.wait(reqs, ofiSoon(), "s");
    } else {
      int z = 20;
      t.wait({t.isend(0, ofiP2p(9), &z, sizeof(int))}, ofiSoon(), "s");
    }
  });
}

TEST(Ofi, MismatchedCollectiveAndSizeAreReported) {
  runOfiRanks(2, [&](int rank, Ofi& t) {
    std::vector<uint8_t> buf(3 * kEager, 1);
    if (rank == 0) {
      // Small and large sends of collective #3 as op 11, and a p2p of the wrong size.
      auto a = t.isend(1, {TagSpace::kCollective, 0, 3, 11}, buf.data(), 64);
      auto b = t.isend(1, {TagSpace::kCollective, 1, 3, 11}, buf.data(), buf.size());
      int64_t big = 1;
      auto c = t.isend(1, ofiP2p(3), &big, sizeof(big));
      t.wait({a, b, c}, ofiSoon(), "sends");  // the large one completes although discarded
      t.wait({t.isend(1, ofiP2p(4), &big, sizeof(big))}, ofiSoon(), "done");
    } else {
      auto small = t.irecv(0, {TagSpace::kCollective, 0, 3, 12}, buf.data(), 64);
      EXPECT_NE(errorOf(t, small).find("ran "), std::string::npos);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      auto large = t.irecv(0, {TagSpace::kCollective, 1, 3, 12}, buf.data(), buf.size());
      EXPECT_NE(errorOf(t, large).find("different collectives"), std::string::npos);
      int32_t small32 = 0;
      EXPECT_NE(errorOf(t, t.irecv(0, ofiP2p(3), &small32, 4)).find("sent 8 bytes"),
                std::string::npos);
      // Stay until rank 0's sends are done: the discarded payload still flows to this endpoint.
      int64_t done = 0;
      t.wait({t.irecv(0, ofiP2p(4), &done, sizeof(done))}, ofiSoon(), "done");
    }
  });
}

TEST(Ofi, TimeoutNamesTheSilentRanks) {
  runOfiRanks(3, [&](int rank, Ofi& t) {
    if (rank != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      return;
    }
    int a, b;
    auto r1 = t.irecv(1, ofiP2p(1), &a, sizeof(int));
    auto r2 = t.irecv(2, ofiP2p(1), &b, sizeof(int));
    const auto start = net::Clock::now();
    try {
      t.wait({r1, r2}, ofiSoon(200), "allreduce #4");
      ADD_FAILURE() << "no timeout";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
      EXPECT_NE(std::string(e.what()).find("allreduce #4 timed out; no data from rank(s) [1, 2]"),
                std::string::npos)
          << e.what();
    }
    EXPECT_LT(net::Clock::now() - start, std::chrono::seconds(2));
  });
}

// Waiting ranks sleep in the kernel (fi_cq_sread), so oversubscribed ranks do not starve each
// other: three ranks waiting half a second use a small fraction of one CPU.
TEST(Ofi, WaitingBurnsNoCpu) {
  auto cpuSeconds = [] {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
           (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  };
  std::atomic<int> ready{0};
  double before = 0, after = 0;
  runOfiRanks(3, [&](int rank, Ofi& t) {
    ++ready;
    while (ready.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (rank == 0) before = cpuSeconds();
    int v;
    auto r = t.irecv((rank + 1) % 3, ofiP2p(99), &v, sizeof(v));
    EXPECT_NE(errorOf(t, r, 500).find("timed out"), std::string::npos);
    if (rank == 0) after = cpuSeconds();
  });
  EXPECT_LT(after - before, 0.15) << "CPU seconds used by 3 ranks waiting 0.5 s";
}

TEST(Ofi, AbortReachesPeersWithReason) {
  runOfiRanks(3, [&](int rank, Ofi& t) {
    if (rank == 2) {
      t.abort("rank 2 gave up on purpose");
      int v = 0;
      EXPECT_EQ(t.isend(0, ofiP2p(1), &v, 4)->state(), net::Request::State::kFailed);
      return;
    }
    int v;
    auto r = t.irecv(2, {TagSpace::kCollective, 0, 1}, &v, sizeof(v));
    const std::string error = errorOf(t, r);
    EXPECT_NE(error.find("rank 2 aborted the communicator: rank 2 gave up on purpose"),
              std::string::npos)
        << error;
    std::string why;
    EXPECT_TRUE(t.peerFailed(2, &why));
    EXPECT_FALSE(t.peerFailed(1 - rank, nullptr));
  });
}

TEST(Ofi, StatusQueryIsAnsweredByTheProgressThread) {
  runOfiRanks(3, [&](int rank, Ofi& t) {
    t.setStatusProvider([rank] { return "rank " + std::to_string(rank) + " is here"; });
    int go = 0;
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      auto replies = t.queryStatus(ofiSoon(5000));
      ASSERT_EQ(replies.size(), 3u);
      for (int r = 0; r < 3; ++r) EXPECT_EQ(replies[r], "rank " + std::to_string(r) + " is here");
      std::vector<net::RequestPtr> reqs{t.isend(1, ofiP2p(1), &go, 4),
                                        t.isend(2, ofiP2p(1), &go, 4)};
      t.wait(reqs, ofiSoon(), "release");
    } else {
      // Blocked in wait (as a stuck collective would be) while rank 0 asks.
      t.wait({t.irecv(0, ofiP2p(1), &go, 4)}, ofiSoon(), "held");
    }
  });
}

// The one-sided contract shared with the other transports (one_sided_testing.h), and a signal
// too wide for the provider's remote CQ data.
TEST(Ofi, OneSidedWritesWithSignals) {
  runOfiRanks(2, [&](int rank, Ofi& t) {
    testing::OneSidedCase options;
    options.bytes = 4 << 20;
    options.targetChecks = false;
    testing::checkOneSidedWrites(rank, 2, t, options);
    std::vector<uint8_t> memory(64);
    auto reg = t.registerMemory(memory.data(), memory.size());
    auto huge = t.iwrite(1 - rank, memory.data(), 1, reg->remote(), 0, uint64_t{1} << 50);
    EXPECT_NE(errorOf(t, huge).find("does not fit"), std::string::npos);
  });
}

// Ranks in two network namespaces joined by a veth pair (made here; skipped where namespaces
// cannot be made): each opens its endpoint on the interface that routes to the store host, not
// on loopback. Ranks are threads, each moved into its namespace (setns is per thread).
TEST(Ofi, RanksInTwoNetworkNamespaces) {
  const std::string tag = std::to_string(::getpid() % 100000);
  const std::string a = "xofiA" + tag, b = "xofiB" + tag;
  const std::string setup = "ip netns add " + a + " && ip netns add " + b + " && ip link add va" +
                            tag + " type veth peer name vb" + tag + " && ip link set va" + tag +
                            " netns " + a + " && ip link set vb" + tag + " netns " + b +
                            " && ip -n " + a + " addr add 10.211.0.1/24 dev va" + tag +
                            " && ip -n " + b + " addr add 10.211.0.2/24 dev vb" + tag +
                            " && ip -n " + a + " link set va" + tag + " up && ip -n " + b +
                            " link set vb" + tag + " up";
  const bool made = std::system((setup + " 2>/dev/null").c_str()) == 0;
  auto cleanup = [&] {
    (void)!std::system(
        ("ip netns del " + a + " 2>/dev/null; ip netns del " + b + " 2>/dev/null").c_str());
  };
  if (!made) {
    cleanup();
    GTEST_SKIP() << "cannot make network namespaces here (needs root and iproute2)";
  }
  // A veth pair carries traffic once both ends have carrier, a moment after "up".
  const std::string carrier = "ip -n " + a + " link show va" + tag +
                              " | grep -q LOWER_UP && ip -n " + b + " link show vb" + tag +
                              " | grep -q LOWER_UP";
  for (int i = 0; i < 100 && std::system(carrier.c_str()) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  net::MemoryStore store;
  net::NetOptions options = testing::ofiLoopbackOptions("ns");
  options.storeHost = "10.211.0.1";
  std::vector<std::string> interfaces(2);
  std::vector<int> got(2, 0);
  try {
    testing::runThreads(2, [&](int rank) {
      const int fd = ::open(("/var/run/netns/" + (rank == 0 ? a : b)).c_str(), O_RDONLY);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(::setns(fd, CLONE_NEWNET), 0);
      ::close(fd);
      interfaces[rank] = net::ofi::describeChoice(options.storeHost);
      Ofi t(store, rank, 2, options, testing::kLoopbackProvider);
      std::vector<int> out(kEager, rank + 1), in(kEager, 0);  // a payload of its own
      auto r = t.irecv(1 - rank, ofiP2p(1), in.data(), in.size() * 4);
      t.wait({r, t.isend(1 - rank, ofiP2p(1), out.data(), out.size() * 4)}, ofiSoon(), "veth");
      got[rank] = in.back();
    });
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
  EXPECT_EQ(interfaces[0], "tcp;ofi_rxm on va" + tag);
  EXPECT_EQ(interfaces[1], "tcp;ofi_rxm on vb" + tag);
  EXPECT_EQ(got, (std::vector<int>{2, 1}));
}

TEST(Ofi, UnknownProviderListsTheOffered) {
  net::MemoryStore store;
  try {
    Ofi t(store, 0, 1, testing::ofiLoopbackOptions(), "no_such_provider");
    ADD_FAILURE() << "accepted an unknown provider";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    const std::string what = e.what();
    EXPECT_NE(what.find("XCCL_OFI_PROVIDER=no_such_provider"), std::string::npos) << what;
    EXPECT_NE(what.find("tcp;ofi_rxm"), std::string::npos) << what;
  }
  std::string why;
  EXPECT_FALSE(net::ofi::providerAvailable("no_such_provider", &why, false));
  EXPECT_NE(why.find("no_such_provider"), std::string::npos);
  EXPECT_TRUE(net::ofi::providerAvailable(testing::kLoopbackProvider, &why, false));
  EXPECT_FALSE(net::ofi::providerAvailable(testing::kLoopbackProvider, &why, /*rdmaOnly=*/true));
  EXPECT_NE(why.find("no RDMA provider"), std::string::npos) << why;
}

TEST(OfiCache, BoundedWithLruEviction) {
  std::vector<uint8_t> memory(10000);
  int registered = 0, live = 0;
  auto fake = [&](const void*, size_t) -> std::shared_ptr<void> {
    ++registered;
    ++live;
    return std::shared_ptr<void>(new int(0), [&](void* p) {
      --live;
      delete static_cast<int*>(p);
    });
  };
  const auto before = net::ofi::processCacheStats();
  {
    net::ofi::RegistrationCache cache(3000, fake);
    auto a = cache.get(memory.data(), 1000);
    cache.get(memory.data() + 2000, 1000);
    EXPECT_EQ(cache.get(memory.data() + 100, 500), a);  // inside a: a hit
    cache.get(memory.data() + 4000, 1000);  // full: 3000 bytes
    cache.get(memory.data() + 6000, 1000);  // evicts the least recent (+2000)
    auto s = cache.stats();
    EXPECT_EQ(s.entries, 3u);
    EXPECT_EQ(s.bytes, 3000u);
    EXPECT_EQ(s.hits, 1u);
    EXPECT_EQ(s.misses, 4u);
    EXPECT_EQ(s.evictions, 1u);
    EXPECT_EQ(live, 3);
    cache.get(memory.data() + 2000, 1000);  // registered again: it was evicted
    EXPECT_EQ(registered, 5);
    cache.get(memory.data() + 6000, 1000);
    EXPECT_EQ(cache.stats().hits, 2u);
    auto big = cache.get(memory.data(), 5000);  // over the bound: not cached
    EXPECT_EQ(cache.stats().bytes, 3000u);
    // Three cached, the first (evicted, still held by `a`) and the uncached big one.
    EXPECT_EQ(live, 5);
    const auto during = net::ofi::processCacheStats();
    EXPECT_EQ(during.entries - before.entries, 3u);
    EXPECT_EQ(during.evictions - before.evictions, 2u);
  }
  EXPECT_EQ(live, 0);
  EXPECT_EQ(net::ofi::processCacheStats().entries, before.entries);
}

}  // namespace
}  // namespace xccl::net::ofi
