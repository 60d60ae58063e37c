// Authenticated TCP links on real transports: a connection must prove the job's key for this
// group (wire.h), is refused and logged when it cannot, and even when it can it never displaces
// a healthy link.
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <thread>

#include "harness.h"
#include "net/transport/tcp/handshake.h"

namespace xccl {
namespace {

using net::tcp::Handshake;
using net::tcp::HandshakeTerms;
using net::tcp::TcpTransport;
using Ms = std::chrono::milliseconds;

struct Pair {
  net::MemoryStore store;
  std::unique_ptr<TcpTransport> t[2];
  explicit Pair(const std::string& prefix) {
    auto o = testing::loopbackOptions(prefix);
    o.linkTimeout = Ms(5000);  // a healthy link stays so however slow the machine
    testing::runThreads(2, [&](int r) { t[r] = std::make_unique<TcpTransport>(store, r, 2, o); });
  }
  ~Pair() {
    testing::runThreads(2, [&](int r) { t[r].reset(); });
  }
  // One message each way: the link between them still works.
  void exchange() {
    testing::runThreads(2, [&](int r) {
      int mine = r + 10, got = -1;
      auto s = t[r]->isend(1 - r, testing::p2pTag(3), &mine, sizeof(mine));
      auto q = t[r]->irecv(1 - r, testing::p2pTag(3), &got, sizeof(got));
      t[r]->wait({s, q}, testing::soon(), "exchange");
      EXPECT_EQ(got, 11 - r);
    });
  }
};

net::tcp::Socket dialRank0(Pair& pair) {
  return net::tcp::connectTo(net::tcp::Address::parse(pair.t[0]->listenAddress()),
                             testing::soon(5000));
}

// Whether rank 0 closes `fd` within `ms` (reads and drops whatever comes first).
bool closedByPeer(int fd, int ms) {
  const auto until = net::Clock::now() + Ms(ms);
  uint8_t sink[256];
  while (net::Clock::now() < until) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 100) <= 0) continue;
    const ssize_t n = ::recv(fd, sink, sizeof(sink), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
  }
  return false;
}

// Runs a dialer's half as rank 1, link 0, with `terms`: the connection, or throws.
net::tcp::Socket handshakeAsRank1(net::tcp::Socket socket, const HandshakeTerms& terms) {
  Handshake h(std::move(socket), terms, /*peer=*/0, /*link=*/0, testing::soon(5000));
  net::tcp::finishDial(h, "rank 0");
  return h.take();
}

// Rank 0's manager logs a refusal on its own thread, just after it closed the connection.
std::string logAfterRefusal() {
  std::this_thread::sleep_for(Ms(300));
  return ::testing::internal::GetCapturedStderr();
}

TEST(TcpAuth, AValidHelloDoesNotReplaceAHealthyLink) {
  Pair pair("auth-healthy");
  // Rank 1's own key and group: the handshake passes on both ends.
  net::tcp::Socket s = handshakeAsRank1(dialRank0(pair), pair.t[1]->handshakeTerms());
  EXPECT_TRUE(closedByPeer(s.fd(), 3000)) << "rank 0 kept the second connection";
  const auto counters = pair.t[0]->linkCounters(1, 0);
  EXPECT_TRUE(counters.up);
  EXPECT_EQ(counters.failures, 0u) << "the healthy link was replaced";
  pair.exchange();
}

TEST(TcpAuth, WrongKeyIsRefusedAndLogged) {
  Pair pair("auth-key");
  HandshakeTerms wrong = pair.t[1]->handshakeTerms();
  wrong.key[0] ^= 1;
  // As a dialer: rank 0's challenge shows it holds another key.
  try {
    handshakeAsRank1(dialRank0(pair), wrong);
    ADD_FAILURE() << "a handshake with the wrong key passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not prove"), std::string::npos) << e.what();
  }
  // As rank 0 sees it: an offer, then a proof made without the key.
  net::tcp::Socket s = dialRank0(pair);
  net::tcp::Hello offer;
  offer.rank = 1;
  std::memcpy(offer.group, wrong.group, sizeof(offer.group));
  ::testing::internal::CaptureStderr();
  s.sendAll(&offer, sizeof(offer), testing::soon(5000));
  net::tcp::Hello challenge;
  s.recvAll(&challenge, sizeof(challenge), testing::soon(5000));
  net::tcp::Hello proof = offer;
  proof.step = net::tcp::HelloStep::kProof;
  std::memcpy(proof.mac, challenge.mac, sizeof(proof.mac));  // the best a keyless dialer has
  s.sendAll(&proof, sizeof(proof), testing::soon(5000));
  EXPECT_TRUE(closedByPeer(s.fd(), 3000));
  const std::string log = logAfterRefusal();
  EXPECT_NE(log.find("refused a connection from"), std::string::npos) << log;
  EXPECT_NE(log.find("wrong key"), std::string::npos) << log;
  EXPECT_EQ(pair.t[0]->linkCounters(1, 0).failures, 0u);
  pair.exchange();
}

TEST(TcpAuth, AReplayedHandshakeIsRefused) {
  Pair pair("auth-replay");
  // Record what a real rank 1 sends on one connection (its offer and proof)...
  const HandshakeTerms& terms = pair.t[1]->handshakeTerms();
  net::tcp::HelloExchange recorder(terms, 0, 0, std::vector<uint8_t>(16, 5).data());
  net::tcp::Socket s = dialRank0(pair);
  net::tcp::Hello offer, challenge, proof;
  ASSERT_TRUE(recorder.outgoing(&offer));
  s.sendAll(&offer, sizeof(offer), testing::soon(5000));
  s.recvAll(&challenge, sizeof(challenge), testing::soon(5000));
  ASSERT_EQ(recorder.receive(&challenge, sizeof(challenge)), "");
  ASSERT_TRUE(recorder.outgoing(&proof));
  s.sendAll(&proof, sizeof(proof), testing::soon(5000));
  EXPECT_TRUE(closedByPeer(s.fd(), 3000));  // a valid one, but the link is healthy
  // ...and replay both on a new connection: rank 0's fresh challenge does not match.
  ::testing::internal::CaptureStderr();
  net::tcp::Socket replay = dialRank0(pair);
  replay.sendAll(&offer, sizeof(offer), testing::soon(5000));
  replay.sendAll(&proof, sizeof(proof), testing::soon(5000));
  EXPECT_TRUE(closedByPeer(replay.fd(), 3000));
  const std::string log = logAfterRefusal();
  EXPECT_NE(log.find("wrong key"), std::string::npos) << log;
  EXPECT_EQ(pair.t[0]->linkCounters(1, 0).failures, 0u);
  pair.exchange();
}

TEST(TcpAuth, AHelloForAnotherGroupIsRefused) {
  Pair a("auth-group"), b("auth-group-other");
  ::testing::internal::CaptureStderr();
  // Another group's rank 1 (its own key and group id).
  EXPECT_THROW(handshakeAsRank1(dialRank0(a), b.t[1]->handshakeTerms()), Error);
  // The same key, another group id (what a shared XCCL_NET_KEY_FILE gives two groups).
  HandshakeTerms sameKey = a.t[1]->handshakeTerms();
  std::memcpy(sameKey.group, b.t[1]->handshakeTerms().group, sizeof(sameKey.group));
  EXPECT_THROW(handshakeAsRank1(dialRank0(a), sameKey), Error);
  const std::string log = logAfterRefusal();
  EXPECT_NE(log.find("from another group or job"), std::string::npos) << log;
  EXPECT_EQ(a.t[0]->linkCounters(1, 0).failures, 0u);
  a.exchange();
}

}  // namespace
}  // namespace xccl
