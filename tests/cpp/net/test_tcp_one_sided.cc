// One-sided writes over TCP (net/transport/tcp/memory.h): the shared contract at 2 and 3 ranks,
// over several links with one failing mid-write, deregistration during a write, and a peer's death.
#include "harness.h"
#include "one_sided_testing.h"

namespace xccl {
namespace {

using testing::runRanks;
using testing::soon;
constexpr auto p2p = testing::p2pTag;

TEST(TcpOneSided, ContractAtTwoAndThreeRanks) {
  for (int size : {2, 3}) {
    runRanks(size,
             [&](int rank, net::Transport& t) { testing::checkOneSidedWrites(rank, size, t, {}); });
  }
}

// A link killed while a large write streams: its chunks are replayed on the other link and the
// write lands whole, exactly once.
TEST(TcpOneSided, WriteSurvivesALinkFailure) {
  auto options = testing::loopbackOptions("tcp-1s-links");
  options.streams = 2;
  options.linkTimeout = std::chrono::milliseconds(1000);
  runRanks(2, options, [&](int rank, net::Transport& base) {
    auto& t = static_cast<net::tcp::TcpTransport&>(base);
    const size_t bytes = 16 << 20;
    std::vector<uint8_t> target(bytes, 0), source(bytes);
    for (size_t i = 0; i < bytes; ++i) source[i] = testing::patternByte(rank, i);
    auto registration = t.registerMemory(target.data(), bytes);
    const net::RemoteRegion mine = registration->remote();
    net::RemoteRegion theirs;
    const int peer = 1 - rank;
    t.wait({t.isend(peer, p2p(1), &mine, sizeof(mine)),
            t.irecv(peer, p2p(1), &theirs, sizeof(theirs))},
           soon(), "regions");
    auto write = t.iwrite(peer, source.data(), bytes, theirs, 0, 3);
    if (rank == 0) t.killLink(1, 0);
    t.wait({write, t.iwaitWrite(peer, 3)}, soon(), "write across a failure");
    for (size_t i = 0; i < bytes; i += 4093) ASSERT_EQ(target[i], testing::patternByte(peer, i));
    EXPECT_EQ(target[bytes - 1], testing::patternByte(peer, bytes - 1));
  });
}

// The target deregisters while a write arrives (one_sided_testing.h).
TEST(TcpOneSided, DeregisteringDuringAWriteStopsIt) {
  runRanks(2,
           [&](int rank, net::Transport& t) { testing::checkDeregistrationDuringWrite(rank, t); });
}

// A writer that goes away fails the waits for its signals, naming it; writes to it fail too.
TEST(TcpOneSided, PeerDeathFailsWaitsNamingThePeer) {
  runRanks(2, [&](int rank, net::Transport& t) {
    int go = 1;
    if (rank == 0) {
      t.wait({t.irecv(1, p2p(1), &go, 4)}, soon(), "posted");
      return;  // the transport closes: rank 1 sees rank 0 gone
    }
    auto wait = t.iwaitWrite(0, 5);
    t.wait({t.isend(0, p2p(1), &go, 4)}, soon(), "posted");
    try {
      t.wait({wait}, soon(), "signal");
      ADD_FAILURE() << "a wait on a departed writer completed";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kPeerFailure) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
    }
    std::vector<uint8_t> memory(64);
    auto registration = t.registerMemory(memory.data(), memory.size());
    auto write = t.iwrite(0, memory.data(), 8, registration->remote(), 0, 1);
    EXPECT_EQ(testing::errorKindOf([&] { t.wait({write}, soon(), "write"); }),
              ErrorKind::kPeerFailure);
    EXPECT_EQ(testing::errorKindOf([&] { t.wait({t.iwaitWrite(0, 6)}, soon(), "late wait"); }),
              ErrorKind::kPeerFailure);
  });
}

}  // namespace
}  // namespace xccl
