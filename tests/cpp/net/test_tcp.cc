// TCP transport: matching, FIFO order, unexpected messages, failures and timeouts.
#include <atomic>
#include <numeric>

#include "harness.h"

namespace xccl {
namespace {

using net::MessageTag;
using net::TagSpace;
using testing::runRanks;

MessageTag p2p(uint64_t tag) { return {TagSpace::kPointToPoint, 0, tag}; }
net::Deadline soon(int ms = 10000) { return net::Clock::now() + std::chrono::milliseconds(ms); }

TEST(Tcp, PingPongAllPairs) {
  for (int size : {2, 3, 4}) {
    runRanks(size, [&](int rank, net::Transport& t) {
      std::vector<int> in(size, -1);
      std::vector<net::RequestPtr> reqs;
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        reqs.push_back(t.irecv(peer, p2p(7), &in[peer], sizeof(int)));
      }
      for (int peer = 0; peer < size; ++peer) {
        if (peer == rank) continue;
        static thread_local int value;
        value = rank * 100;
        reqs.push_back(t.isend(peer, p2p(7), &value, sizeof(int)));
        t.wait({reqs.back()}, soon(), "send");
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

TEST(Tcp, LargeMessageBeforeAndAfterPosting) {
  const size_t count = (8 << 20) / sizeof(uint32_t);  // 8 MiB: many socket buffers
  runRanks(2, [&](int rank, net::Transport& t) {
    std::vector<uint32_t> out(count), early(count, 0), late(count, 0);
    std::iota(out.begin(), out.end(), rank * 7u);
    int peer = 1 - rank;
    auto r1 = t.irecv(peer, p2p(1), early.data(), count * 4);  // posted before the data comes
    auto s1 = t.isend(peer, p2p(1), out.data(), count * 4);
    auto s2 = t.isend(peer, p2p(2), out.data(), count * 4);
    t.wait({r1, s1, s2}, soon(), "large");
    auto r2 = t.irecv(peer, p2p(2), late.data(), count * 4);  // data already arrived
    t.wait({r2}, soon(), "late");
    for (size_t i = 0; i < count; i += 4097) {
      ASSERT_EQ(early[i], i + peer * 7u);
      ASSERT_EQ(late[i], i + peer * 7u);
    }
  });
}

TEST(Tcp, SameTagMatchesInOrderAndAnySource) {
  runRanks(3, [&](int rank, net::Transport& t) {
    if (rank == 0) {
      int a = -1, b = -1;
      auto ra = t.irecv(1, p2p(5), &a, sizeof(int));
      auto rb = t.irecv(1, p2p(5), &b, sizeof(int));
      t.wait({ra, rb}, soon(), "fifo");
      EXPECT_EQ(a, 10);
      EXPECT_EQ(b, 11);
      int any = -1;
      auto rany = t.irecv(net::kAnySource, p2p(9), &any, sizeof(int));
      t.wait({rany}, soon(), "any");
      EXPECT_EQ(rany->peer(), 2);
      EXPECT_EQ(any, 20);
    } else if (rank == 1) {
      int x = 10, y = 11;
      t.wait({t.isend(0, p2p(5), &x, sizeof(int)), t.isend(0, p2p(5), &y, sizeof(int))}, soon(),
             "s");
    } else {
      int z = 20;
      t.wait({t.isend(0, p2p(9), &z, sizeof(int))}, soon(), "s");
    }
  });
}

TEST(Tcp, SizeMismatchIsReportedNotMisread) {
  runRanks(2, [&](int rank, net::Transport& t) {
    if (rank == 0) {
      int64_t big = 1;
      t.wait({t.isend(1, p2p(3), &big, sizeof(big))}, soon(), "send");
    } else {
      int32_t small = 0;
      auto r = t.irecv(0, p2p(3), &small, sizeof(small));
      try {
        t.wait({r}, soon(), "recv");
        ADD_FAILURE() << "mismatch not detected";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kPeerFailure);
        EXPECT_NE(std::string(e.what()).find("sent 8 bytes"), std::string::npos) << e.what();
      }
    }
  });
}

TEST(Tcp, TimeoutNamesTheSilentRank) {
  runRanks(3, [&](int rank, net::Transport& t) {
    if (rank != 0) {  // alive but silent for longer than rank 0 waits
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
      return;
    }
    int a, b;
    auto r1 = t.irecv(1, p2p(1), &a, sizeof(int));
    auto r2 = t.irecv(2, p2p(1), &b, sizeof(int));
    auto start = net::Clock::now();
    try {
      t.wait({r1, r2}, soon(200), "allreduce #4");
      ADD_FAILURE() << "no timeout";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
      std::string msg = e.what();
      EXPECT_NE(msg.find("allreduce #4 timed out"), std::string::npos) << msg;
      EXPECT_NE(msg.find("[1, 2]"), std::string::npos) << msg;
    }
    EXPECT_LT(net::Clock::now() - start, std::chrono::seconds(5));
  });
}

TEST(Tcp, AbortReachesPeersWithReason) {
  runRanks(3, [&](int rank, net::Transport& t) {
    if (rank == 2) {
      t.abort("rank 2 gave up on purpose");
      return;
    }
    int v;
    auto r = t.irecv(2, {TagSpace::kCollective, 0, 1}, &v, sizeof(v));
    try {
      t.wait({r}, soon(), "allreduce #1");
      ADD_FAILURE() << "abort not seen";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kPeerFailure);
      EXPECT_NE(std::string(e.what()).find("gave up on purpose"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace xccl
