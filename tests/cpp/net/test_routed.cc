// RoutedTransport over simulated hosts (ranks 0, 1 on host A; 2, 3 on host B): shared memory
// inside a host, TCP between hosts, checked by counting what each route carried; and the
// factory on one host.
#include "net/transport/factory.h"
#include "net/transport/routed_transport.h"
#include "net/transport/tcp/transport.h"
#include "shm_transport_testing.h"

namespace xccl {
namespace {

using net::MessageTag;
using net::TagSpace;
using testing::p2pTag;
using testing::soon;

constexpr int kRanks = 4;
int hostOf(int rank) { return rank / 2; }

// Runs body on 4 ranks, each with a RoutedTransport built as the factory would for two hosts.
void runTwoHosts(const std::function<void(int, net::RoutedTransport&)>& body) {
  net::MemoryStore store;
  testing::runThreads(kRanks, [&](int rank) {
    const std::vector<int> local = {2 * hostOf(rank), 2 * hostOf(rank) + 1};
    auto shm =
        testing::makeShm(store, rank, kRanks, local, "p2p/host" + std::to_string(hostOf(rank)));
    auto tcp =
        std::make_unique<net::tcp::TcpTransport>(store, rank, kRanks, testing::loopbackOptions());
    std::vector<bool> onHost(kRanks);
    for (int r = 0; r < kRanks; ++r) onHost[r] = hostOf(r) == hostOf(rank);
    net::RoutedTransport routed(std::move(tcp), std::move(shm), onHost);
    body(rank, routed);
  });
}

TEST(Routed, SameHostOverShmOtherHostsOverTcp) {
  runTwoHosts([](int rank, net::RoutedTransport& routed) {
    net::Transport& t = routed;  // the interface's default arguments
    EXPECT_STREQ(t.name(), "shm+tcp");
    const int mate = rank ^ 1, far = (rank + 2) % kRanks;
    EXPECT_STREQ(routed.routeOf(mate).name(), "shm");
    EXPECT_STREQ(routed.routeOf(far).name(), "tcp");
    // Point-to-point takes the network to every peer, so a receive from any source sees all.
    EXPECT_STREQ(routed.routeOf(mate, TagSpace::kPointToPoint).name(), "tcp");
    const MessageTag tag{TagSpace::kCollective, 0, 1, 7};
    std::vector<int> in(kRanks, -1), out(kRanks, rank);
    std::vector<net::RequestPtr> reqs;
    for (int peer = 0; peer < kRanks; ++peer) {
      if (peer == rank) continue;
      reqs.push_back(t.irecv(peer, tag, &in[peer], sizeof(int)));
      reqs.push_back(t.isend(peer, tag, &out[peer], sizeof(int)));
    }
    t.wait(reqs, soon(), "allgather #1");
    for (int peer = 0; peer < kRanks; ++peer) {
      if (peer != rank) {
        EXPECT_EQ(in[peer], peer);
      }
    }
    EXPECT_EQ(routed.sentOverHost(), 1u);     // to the one rank on this host
    EXPECT_EQ(routed.sentOverNetwork(), 2u);  // to the two on the other host
    // Any source, one message from each peer.
    std::vector<net::RequestPtr> sends;
    for (int peer = 0; peer < kRanks; ++peer) {
      if (peer != rank) sends.push_back(t.isend(peer, p2pTag(3), &out[peer], sizeof(int)));
    }
    std::vector<bool> seen(kRanks, false);
    for (int i = 0; i < kRanks - 1; ++i) {
      int value = -1;
      auto r = t.irecv(net::kAnySource, p2pTag(3), &value, sizeof(int));
      t.wait({r}, soon(), "recv any");
      EXPECT_EQ(value, r->peer());
      seen[r->peer()] = true;
    }
    t.wait(sends, soon(), "sends");
    EXPECT_EQ(std::count(seen.begin(), seen.end(), true), kRanks - 1);
    EXPECT_EQ(routed.sentOverNetwork(), 5u);
  });
}

TEST(Routed, StatusAbortAndOneSidedWrites) {
  runTwoHosts([](int rank, net::RoutedTransport& routed) {
    net::Transport& t = routed;  // the interface's default arguments
    t.setStatusProvider([rank] { return "at " + std::to_string(rank); });
    if (rank != 0) t.wait({t.isend(0, p2pTag(7), nullptr, 0)}, soon(), "ready");
    std::vector<uint32_t> target(64, 0);
    auto registration = t.registerMemory(target.data(), target.size() * 4);
    const net::RemoteRegion mine = registration->remote();
    EXPECT_NE(mine.hostKey, 0u);
    EXPECT_NE(mine.key, 0u);  // TCP's: one-sided writes from other hosts go over it
    // Rank 0's region goes to its host mate and to a rank of the other host.
    net::RemoteRegion region0 = mine;
    if (rank == 0) {
      t.wait({t.isend(1, p2pTag(8), &mine, sizeof(mine)),
              t.isend(2, p2pTag(8), &mine, sizeof(mine))},
             soon(), "region");
    }
    if (rank == 1 || rank == 2) {
      t.wait({t.irecv(0, p2pTag(8), &region0, sizeof(region0))}, soon(), "region");
      const uint32_t value = 41 + rank;
      const uint64_t overNetwork = routed.sentOverNetwork();
      t.wait({t.iwrite(0, &value, 4, region0, 4 + 4 * rank, 4 + rank, nullptr)}, soon(), "write");
      EXPECT_EQ(routed.sentOverNetwork(), overNetwork + (rank == 2 ? 1 : 0));
    } else if (rank == 0) {
      t.wait({t.iwaitWrite(1, 5, nullptr), t.iwaitWrite(2, 6, nullptr)}, soon(), "signals");
      EXPECT_EQ(target[2], 42u);  // over shared memory
      EXPECT_EQ(target[3], 43u);  // over TCP
      for (int peer = 1; peer < kRanks; ++peer) {  // their providers are set
        t.wait({t.irecv(peer, p2pTag(7), nullptr, 0)}, soon(), "ready");
      }
      const auto replies = t.queryStatus(soon(2000));
      for (int r = 0; r < kRanks; ++r) EXPECT_EQ(replies[r], "at " + std::to_string(r));
      // Rank 3 aborts only once every rank answered.
      t.wait({t.isend(3, p2pTag(9), nullptr, 0)}, soon(), "go");
    }
    // Everyone waits for rank 3, which aborts: the reason reaches its host mate over shared
    // memory and the other host over TCP.
    if (rank == 3) {
      t.wait({t.irecv(0, p2pTag(9), nullptr, 0)}, soon(), "go");
      t.abort("rank 3 stops");
      return;
    }
    int x;
    auto r = t.irecv(3, MessageTag{TagSpace::kCollective, 0, 2, 0}, &x, sizeof(x));
    EXPECT_EQ(testing::errorKindOf([&] { t.wait({r}, soon(), "allreduce #2"); }),
              ErrorKind::kPeerFailure);
    EXPECT_NE(r->errorMessage().find("rank 3 stops"), std::string::npos) << r->errorMessage();
    EXPECT_TRUE(t.peerFailed(3, nullptr));
  });
}

TEST(Factory, OneHostUsesSharedMemoryOnly) {
  EXPECT_EQ(net::chooseEngine("tcp"), net::Engine::kTcp);
  EXPECT_STREQ(net::engineName(net::Engine::kTcp), "tcp");
  EXPECT_EQ(testing::errorKindOf([] { net::chooseEngine("bogus"); }), ErrorKind::kInvalidArgument);
  net::MemoryStore store;
  testing::runThreads(3, [&](int rank) {
    net::NetOptions options;
    options.storeHost = "127.0.0.1";
    options.timeout = std::chrono::seconds(30);
    const net::GroupLayout layout =
        net::GroupLayout::take(store, rank, 3, "layout", std::chrono::seconds(30));
    auto t = net::createTransport(store, layout, options);
    EXPECT_STREQ(t->name(), "shm");
    int in = -1, out = rank;
    const int next = (rank + 1) % 3, prev = (rank + 2) % 3;
    t->wait({t->isend(next, p2pTag(1), &out, sizeof(int)), t->irecv(prev, p2pTag(1), &in, 4)},
            soon(), "ring");
    EXPECT_EQ(in, prev);
  });
}

}  // namespace
}  // namespace xccl
