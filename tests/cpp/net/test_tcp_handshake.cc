// The TCP handshake, socket-free (wire.h HelloExchange): only a peer holding the job's key, of
// this group, for an existing rank and link gets through; recorded, reflected or foreign hellos
// are refused with a reason.
#include <gtest/gtest.h>

#include <cstring>

#include "net/transport/tcp/wire.h"

namespace xccl::net::tcp {
namespace {

HandshakeTerms terms(int self, uint8_t keyByte = 7, const std::string& token = "t") {
  HandshakeTerms t;
  std::memset(t.key, keyByte, sizeof(t.key));
  groupId("g", token, t.group);
  t.self = self;
  t.links = {2, 2, 2, 2};
  t.links[self] = 0;
  return t;
}

struct Nonce {
  uint8_t bytes[kNonceBytes];
  explicit Nonce(uint8_t seed) { std::memset(bytes, seed, sizeof(bytes)); }
};

// Passes every hello one way or the other until neither side has one; the first refusal.
std::string run(HelloExchange& dialer, HelloExchange& acceptor,
                std::vector<Hello>* sent = nullptr) {
  for (int round = 0; round < 4; ++round) {
    Hello hello;
    bool any = false;
    for (auto [from, to] : {std::pair{&dialer, &acceptor}, std::pair{&acceptor, &dialer}}) {
      while (from->outgoing(&hello)) {
        any = true;
        if (sent != nullptr) sent->push_back(hello);
        if (std::string why = to->receive(&hello, sizeof(hello)); !why.empty()) return why;
      }
    }
    if (!any) break;
  }
  return "";
}

TEST(TcpHandshake, PeersWithTheKeyFinishOnBothEnds) {
  const HandshakeTerms d = terms(2), a = terms(0);
  HelloExchange dialer(d, /*peer=*/0, /*link=*/1, Nonce(1).bytes);
  HelloExchange acceptor(a, Nonce(2).bytes);
  EXPECT_EQ(run(dialer, acceptor), "");
  EXPECT_TRUE(dialer.done());
  EXPECT_TRUE(acceptor.done());
  EXPECT_EQ(acceptor.peer(), 2);
  EXPECT_EQ(acceptor.link(), 1);
}

TEST(TcpHandshake, WrongKeyIsRefusedByBothEnds) {
  // A dialer without the key: the acceptor refuses its proof.
  const HandshakeTerms wrong = terms(2, /*keyByte=*/8), a = terms(0);
  HelloExchange dialer(wrong, 0, 0, Nonce(1).bytes);
  HelloExchange acceptor(a, Nonce(2).bytes);
  Hello offer, challenge;
  ASSERT_TRUE(dialer.outgoing(&offer));
  ASSERT_EQ(acceptor.receive(&offer, sizeof(offer)), "");
  ASSERT_TRUE(acceptor.outgoing(&challenge));
  // The dialer sees the acceptor has another key, and stops there.
  EXPECT_NE(dialer.receive(&challenge, sizeof(challenge)).find("did not prove"), std::string::npos);
  // Forge the proof a keyless dialer would have to send: refused.
  Hello proof = challenge;
  proof.step = HelloStep::kProof;
  proof.rank = 2;
  EXPECT_NE(acceptor.receive(&proof, sizeof(proof)).find("wrong key"), std::string::npos);
  EXPECT_FALSE(acceptor.done());
}

TEST(TcpHandshake, ARecordedHandshakeReplayedIsRefused) {
  const HandshakeTerms d = terms(3), a = terms(0);
  HelloExchange dialer(d, 0, 1, Nonce(1).bytes);
  HelloExchange acceptor(a, Nonce(2).bytes);
  std::vector<Hello> recorded;
  ASSERT_EQ(run(dialer, acceptor, &recorded), "");
  ASSERT_EQ(recorded.size(), 3u);  // offer, challenge, proof
  // An eavesdropper replays the dialer's offer and proof to a fresh acceptor (fresh nonce).
  HelloExchange replayed(a, Nonce(3).bytes);
  ASSERT_EQ(replayed.receive(&recorded[0], sizeof(Hello)), "");
  EXPECT_NE(replayed.receive(&recorded[2], sizeof(Hello)).find("wrong key"), std::string::npos);
  EXPECT_FALSE(replayed.done());
  // Or replays the acceptor's challenge to a fresh dialer: its own nonce differs.
  HelloExchange dialerAgain(d, 0, 1, Nonce(4).bytes);
  Hello offer;
  ASSERT_TRUE(dialerAgain.outgoing(&offer));
  EXPECT_NE(dialerAgain.receive(&recorded[1], sizeof(Hello)), "");
}

TEST(TcpHandshake, TheAcceptorsMacIsNoProof) {
  // Reflection: a stranger opens two connections and hands the acceptor's own MAC back as the
  // dialer's proof. The MACs name who sends them, so it does not pass.
  const HandshakeTerms a = terms(0);
  HelloExchange acceptor(a, Nonce(2).bytes);
  Hello offer;
  offer.rank = 1;
  offer.link = 0;
  offer.step = HelloStep::kOffer;
  std::memcpy(offer.group, a.group, kGroupIdBytes);
  std::memset(offer.nonce, 2, kNonceBytes);  // the acceptor's nonce as the dialer's
  ASSERT_EQ(acceptor.receive(&offer, sizeof(offer)), "");
  Hello challenge;
  ASSERT_TRUE(acceptor.outgoing(&challenge));
  Hello proof = challenge;
  proof.step = HelloStep::kProof;
  proof.rank = 1;
  EXPECT_NE(acceptor.receive(&proof, sizeof(proof)).find("wrong key"), std::string::npos);
}

TEST(TcpHandshake, AnotherGroupRankOrLinkIsRefused) {
  const HandshakeTerms a = terms(1);
  auto offerFrom = [&](const HandshakeTerms& d, int peer, int link) {
    HelloExchange dialer(d, peer, link, Nonce(1).bytes);
    HelloExchange acceptor(a, Nonce(2).bytes);
    return run(dialer, acceptor);
  };
  EXPECT_EQ(offerFrom(terms(3, 7, "other creation"), 1, 0), "from another group or job");
  EXPECT_EQ(offerFrom(terms(0), 1, 0), "from rank 0, not one expected here");  // lower ranks accept
  EXPECT_EQ(offerFrom(terms(2), 1, 2), "for link 2 of rank 2");
  HelloExchange acceptor(a, Nonce(2).bytes);
  Hello hello;
  EXPECT_NE(acceptor.receive(&hello, sizeof(hello) - 1), "");
  HelloExchange again(a, Nonce(2).bytes);
  hello.magic = 0;
  EXPECT_EQ(again.receive(&hello, sizeof(hello)), "not an xccl handshake");
  // A refused exchange stays refused.
  hello = Hello{};
  EXPECT_NE(again.receive(&hello, sizeof(hello)), "");
}

TEST(TcpHandshake, GroupIdsDifferPerPrefixAndToken) {
  uint8_t a[kGroupIdBytes], b[kGroupIdBytes], c[kGroupIdBytes];
  groupId("tcp/pg0", "token", a);
  groupId("tcp/pg1", "token", b);
  groupId("tcp/pg0", "token2", c);
  EXPECT_NE(std::memcmp(a, b, sizeof(a)), 0);
  EXPECT_NE(std::memcmp(a, c, sizeof(a)), 0);
}

}  // namespace
}  // namespace xccl::net::tcp
