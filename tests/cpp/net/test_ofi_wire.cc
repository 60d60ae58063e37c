// The libfabric transport's pure wire pieces (net/transport/ofi/wire.h, streams.h, auth.h): the
// header check, the per-source stream order with its caps, the remote CQ data codec, and the key
// exchange.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "net/transport/ofi/auth.h"
#include "net/transport/ofi/streams.h"
#include "net/transport/ofi/wire.h"

namespace xccl {
namespace {

using net::ofi::Header;
using net::ofi::HeaderStreams;
using net::ofi::kEagerBytes;
using net::ofi::kMaxEarlyBytes;
using net::ofi::kMaxEarlyHeaders;
using Verdict = HeaderStreams::Verdict;

constexpr uint64_t kSession = 0x5e55;

net::NetKey testKeyOf(uint8_t fill) {
  net::NetKey key;
  key.fill(fill);
  return key;
}

std::vector<uint8_t> message(int source, uint64_t stream, size_t inlineBytes = 0) {
  Header h;
  h.source = source;
  h.session = kSession;
  h.tag.space = net::TagSpace::kPointToPoint;
  h.stream = stream;
  h.bytes = inlineBytes;
  h.inlineBytes = static_cast<uint32_t>(inlineBytes);
  std::vector<uint8_t> m(sizeof(Header) + inlineBytes, 0x5a);
  std::memcpy(m.data(), &h, sizeof(h));
  return m;
}

const char* parse(const std::vector<uint8_t>& m, Header* h, int rank = 0, int size = 3) {
  return net::ofi::parseHeader(m.data(), m.size(), kSession, rank, size, h);
}

template <typename Edit>
std::vector<uint8_t> edited(Edit edit) {
  std::vector<uint8_t> m = message(1, 0, 8);
  Header h;
  std::memcpy(&h, m.data(), sizeof(h));
  edit(h);
  std::memcpy(m.data(), &h, sizeof(h));
  return m;
}

TEST(OfiWire, ParseHeaderRefusesStrangersAndMalformedHeaders) {
  Header h;
  EXPECT_EQ(parse(message(1, 0, 8), &h), nullptr);
  EXPECT_EQ(h.source, 1);
  EXPECT_NE(parse(message(1, 0), &h, /*rank=*/1), nullptr);  // from itself
  EXPECT_NE(parse(message(3, 0), &h), nullptr);              // no such rank
  EXPECT_NE(parse(message(-1, 0), &h), nullptr);
  std::vector<uint8_t> shortMessage = message(1, 0);
  shortMessage.pop_back();
  EXPECT_NE(parse(shortMessage, &h), nullptr);
  EXPECT_NE(parse(edited([](Header& x) { x.session = 1; }), &h), nullptr);
  EXPECT_NE(parse(edited([](Header& x) { x.magic = 0; }), &h), nullptr);
  EXPECT_NE(parse(edited([](Header& x) { x.inlineBytes = 9; }), &h), nullptr);
  EXPECT_NE(parse(edited([](Header& x) { x.bytes = 9; }), &h), nullptr);  // partly inline
  EXPECT_STREQ(parse(edited([](Header& x) { x.tag.space = net::TagSpace{7}; }), &h),
               "unknown tag space");
  EXPECT_NE(parse(edited([](Header& x) { x.kind = net::ofi::Kind{9}; }), &h), nullptr);
  std::vector<uint8_t> large = message(1, 0);
  reinterpret_cast<Header*>(large.data())->bytes = uint64_t{1} << 40;  // a payload of its own
  EXPECT_EQ(parse(large, &h), nullptr);
  EXPECT_EQ(h.bytes, uint64_t{1} << 40);
  std::vector<uint8_t> tooLong = message(1, 0, kEagerBytes + 1);
  EXPECT_NE(parse(tooLong, &h), nullptr);
}

// Control messages: the net level's check of the kind and text (net/transport/control.h), and
// inline only.
TEST(OfiWire, ParseHeaderRefusesUnknownControlKinds) {
  auto control = [](net::ControlKind kind, size_t textBytes, size_t inlineBytes) {
    std::vector<uint8_t> m = message(1, 0, inlineBytes);
    Header h;
    std::memcpy(&h, m.data(), sizeof(h));
    h.kind = net::ofi::Kind::kControl;
    h.control = net::WireControl::make(kind, 5);
    h.tag.space = net::TagSpace{0};  // a control message's tag is not read
    h.bytes = textBytes;
    std::memcpy(m.data(), &h, sizeof(h));
    return m;
  };
  Header h;
  EXPECT_EQ(parse(control(net::ControlKind::kStatusReply, 4, 4), &h), nullptr);
  EXPECT_EQ(h.control.kind, net::ControlKind::kStatusReply);
  EXPECT_EQ(h.control.round, 5u);
  EXPECT_EQ(parse(control(net::ControlKind::kAbort, 0, 0), &h), nullptr);
  EXPECT_STREQ(parse(control(net::ControlKind{0}, 4, 4), &h), "unknown control kind");
  EXPECT_STREQ(parse(control(net::ControlKind{9}, 4, 4), &h), "unknown control kind");
  EXPECT_STREQ(parse(control(net::ControlKind::kStatusQuery, 1, 1), &h),
               "text on a status query, which has none");
  EXPECT_STREQ(parse(control(net::ControlKind::kAbort, 8, 4), &h), "a control message not inline");
}

TEST(OfiWire, StreamsDeliverInOrderAndRefuseRepeats) {
  HeaderStreams streams(3);
  std::string why;
  auto accept = [&](int source, uint64_t stream) {
    std::vector<uint8_t> m = message(source, stream);
    Header h;
    std::memcpy(&h, m.data(), sizeof(h));
    return streams.acceptLocked(h, m.data(), m.size(), &why);
  };
  EXPECT_EQ(accept(1, 2), Verdict::kHeld);
  EXPECT_EQ(accept(1, 1), Verdict::kHeld);
  EXPECT_EQ(accept(2, 0), Verdict::kInTurn);  // sources are independent
  EXPECT_EQ(accept(1, 0), Verdict::kInTurn);
  std::vector<uint8_t> next;
  for (uint64_t stream : {1, 2}) {
    ASSERT_TRUE(streams.nextLocked(1, &next));
    Header h;
    std::memcpy(&h, next.data(), sizeof(h));
    EXPECT_EQ(h.stream, stream);
  }
  EXPECT_FALSE(streams.nextLocked(1, &next));
  EXPECT_EQ(streams.heldCountLocked(1), 0u);
  EXPECT_EQ(accept(1, 2), Verdict::kRefused);  // delivered already
  EXPECT_NE(why.find("rank 1 sent stream message #2 twice"), std::string::npos) << why;
  EXPECT_EQ(accept(1, 3), Verdict::kDropped);  // refused for good
  EXPECT_EQ(accept(2, 2), Verdict::kHeld);
  EXPECT_EQ(accept(2, 2), Verdict::kRefused);  // held already
}

TEST(OfiWire, StreamsCapWhatASourceHoldsAhead) {
  HeaderStreams streams(2);
  std::string why;
  auto accept = [&](uint64_t stream, size_t inlineBytes) {
    std::vector<uint8_t> m = message(1, stream, inlineBytes);
    Header h;
    std::memcpy(&h, m.data(), sizeof(h));
    return streams.acceptLocked(h, m.data(), m.size(), &why);
  };
  for (size_t i = 1; i <= kMaxEarlyHeaders; ++i) ASSERT_EQ(accept(i, 0), Verdict::kHeld) << i;
  EXPECT_EQ(accept(kMaxEarlyHeaders + 1, 0), Verdict::kRefused);
  EXPECT_NE(why.find("rank 1 sent more than 4096 messages or 67108864 bytes ahead of its "
                     "message #0"),
            std::string::npos)
      << why;
  EXPECT_EQ(streams.heldCountLocked(1), 0u);  // freed
  EXPECT_EQ(accept(0, 0), Verdict::kDropped);

  HeaderStreams bytes(2);
  size_t held = 0;
  bool refused = false;
  for (uint64_t stream = 1; stream < 2 * kMaxEarlyBytes / kEagerBytes && !refused; ++stream) {
    std::vector<uint8_t> m = message(1, stream, kEagerBytes);
    Header h;
    std::memcpy(&h, m.data(), sizeof(h));
    const Verdict v = bytes.acceptLocked(h, m.data(), m.size(), &why);
    refused = v == Verdict::kRefused;
    if (refused) break;
    ASSERT_EQ(v, Verdict::kHeld);
    held += m.size();
    ASSERT_LE(bytes.heldBytesLocked(1), kMaxEarlyBytes);
  }
  EXPECT_TRUE(refused);
  EXPECT_LE(held, kMaxEarlyBytes);
  EXPECT_GT(held + sizeof(Header) + kEagerBytes, kMaxEarlyBytes);
  EXPECT_EQ(bytes.heldBytesLocked(1), 0u);
}

TEST(OfiWire, SignalCodecChecksTheWritersRank) {
  const net::ofi::SignalCodec codec(8);
  int rank = -1;
  uint64_t signal = 0;
  ASSERT_TRUE(codec.decode(codec.encode(1, 5), 2, &rank, &signal));
  EXPECT_EQ(rank, 1);
  EXPECT_EQ(signal, 5u);
  ASSERT_TRUE(codec.decode(codec.encode(0, (uint64_t{1} << 48) - 1), 1, &rank, &signal));
  EXPECT_EQ(signal, (uint64_t{1} << 48) - 1);
  // A writer rank at or past the group's size (a foreign or corrupt completion) is refused.
  rank = -1;
  EXPECT_FALSE(codec.decode(codec.encode(2, 5), 2, &rank, &signal));
  EXPECT_FALSE(codec.decode(~uint64_t{0}, 2, &rank, &signal));
  EXPECT_FALSE(codec.decode(codec.encode(0, 1), 0, &rank, &signal));
  EXPECT_EQ(rank, -1);
  // 4 bytes of CQ data: 16 bits of rank above 16 bits of signal.
  const net::ofi::SignalCodec narrow(4);
  EXPECT_EQ(narrow.signalBits, 16u);
  EXPECT_FALSE(narrow.fits(1, 1 << 16));
  EXPECT_FALSE(narrow.fits(-1, 1));
  ASSERT_TRUE(narrow.decode(narrow.encode(3, 9), 4, &rank, &signal));
  EXPECT_EQ(rank, 3);
  EXPECT_EQ(signal, 9u);
  EXPECT_FALSE(narrow.decode(narrow.encode(4, 9), 4, &rank, &signal));
}

// The key exchange between two ranks' PeerAuths, messages handed over by the test (the fabric's
// part). `terms[r]` is rank r's view.
struct AuthPair {
  explicit AuthPair(const net::NetKey& key0, const net::NetKey& key1) {
    for (int r = 0; r < 2; ++r) {
      terms[r].key = r == 0 ? key0 : key1;
      terms[r].group = "pg0/ofi";
      terms[r].session = 0x5e55;
      terms[r].self = r;
      terms[r].addresses = {{1, 2, 3}, {4, 5, 6, 7}};
    }
  }
  void start() {
    uint8_t nonce[net::ofi::kAuthNonceBytes];
    for (int r = 0; r < 2; ++r) {
      std::memset(nonce, 0x10 + r + fresh, sizeof(nonce));
      side[r] = std::make_unique<net::ofi::PeerAuth>(terms[r], 1 - r, nonce);
    }
    ++fresh;
  }
  // Hands `m` to rank `to`; its answer, if any, is returned through *reply.
  std::string give(int to, const net::ofi::AuthMessage& m, net::ofi::AuthMessage* reply,
                   bool* replied) {
    return side[to]->receive(&m, sizeof(m), reply, replied);
  }
  net::ofi::AuthTerms terms[2];
  std::unique_ptr<net::ofi::PeerAuth> side[2];
  int fresh = 0;
};

TEST(OfiAuth, SameKeyProvesBothWays) {
  AuthPair pair(testKeyOf(1), testKeyOf(1));
  pair.start();
  net::ofi::AuthMessage proof[2];
  bool replied = false;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(pair.give(1 - r, pair.side[r]->nonceMessage(), &proof[1 - r], &replied), "");
    EXPECT_TRUE(replied);
  }
  for (int r = 0; r < 2; ++r) {
    net::ofi::AuthMessage none;
    EXPECT_EQ(pair.give(1 - r, proof[r], &none, &replied), "");
    EXPECT_FALSE(replied);
    EXPECT_TRUE(pair.side[1 - r]->proven());
    EXPECT_TRUE(pair.side[1 - r]->answered());
  }
  // Proofs may arrive before nonces (the fabric does not order them).
  pair.start();
  net::ofi::AuthMessage p0;
  EXPECT_EQ(pair.give(0, pair.side[1]->nonceMessage(), &p0, &replied), "");
  EXPECT_EQ(pair.give(1, p0, &proof[0], &replied), "");
  EXPECT_TRUE(pair.side[1]->proven());
}

TEST(OfiAuth, AnotherKeyReflectionReplayAndOtherAddressesAreRefused) {
  bool replied = false;
  net::ofi::AuthMessage proof, ignored;
  {  // another key
    AuthPair pair(testKeyOf(1), testKeyOf(2));
    pair.start();
    EXPECT_EQ(pair.give(1, pair.side[0]->nonceMessage(), &proof, &replied), "");
    const std::string why = pair.give(0, proof, &ignored, &replied);
    EXPECT_NE(why.find("rank 1 did not prove it holds this job's key"), std::string::npos) << why;
    EXPECT_FALSE(pair.side[0]->proven());
    EXPECT_TRUE(pair.side[0]->refused());
    EXPECT_FALSE(pair.side[0]->finished());  // rank 1's nonce is still due an answer
    // ... which it gets, so that rank 1 learns why rather than waiting.
    EXPECT_EQ(pair.give(0, pair.side[1]->nonceMessage(), &ignored, &replied), "");
    EXPECT_TRUE(replied);
    EXPECT_TRUE(pair.side[0]->finished());
    EXPECT_NE(pair.give(1, ignored, &proof, &replied), "");
    EXPECT_TRUE(pair.side[1]->refused());
  }
  {  // rank 0's own proof reflected back to it as rank 1's
    AuthPair pair(testKeyOf(1), testKeyOf(1));
    pair.start();
    EXPECT_EQ(pair.give(0, pair.side[1]->nonceMessage(), &proof, &replied), "");
    proof.rank = 1;
    EXPECT_NE(pair.give(0, proof, &ignored, &replied), "");
    EXPECT_FALSE(pair.side[0]->proven());
  }
  {  // a proof recorded at an earlier creation (rank 0's nonce differs now)
    AuthPair pair(testKeyOf(1), testKeyOf(1));
    pair.start();
    EXPECT_EQ(pair.give(1, pair.side[0]->nonceMessage(), &proof, &replied), "");
    pair.start();
    EXPECT_NE(pair.give(0, proof, &ignored, &replied), "");
    EXPECT_FALSE(pair.side[0]->proven());
  }
  {  // rank 1 proving itself for another endpoint address than rank 0 holds for it
    AuthPair pair(testKeyOf(1), testKeyOf(1));
    pair.terms[1].addresses[1] = {9, 9, 9};
    pair.start();
    EXPECT_EQ(pair.give(1, pair.side[0]->nonceMessage(), &proof, &replied), "");
    EXPECT_NE(pair.give(0, proof, &ignored, &replied), "");
  }
  {  // another session, a rank it is not, a short message, a second nonce
    AuthPair pair(testKeyOf(1), testKeyOf(1));
    pair.start();
    net::ofi::AuthMessage m = pair.side[1]->nonceMessage();
    m.session = 1;
    EXPECT_NE(pair.give(0, m, &ignored, &replied), "");
    pair.start();
    m = pair.side[1]->nonceMessage();
    m.rank = 2;
    EXPECT_NE(pair.give(0, m, &ignored, &replied), "");
    pair.start();
    EXPECT_NE(pair.side[0]->receive(&m, sizeof(m) - 1, &ignored, &replied), "");
    pair.start();
    m = pair.side[1]->nonceMessage();
    EXPECT_EQ(pair.give(0, m, &ignored, &replied), "");
    EXPECT_NE(pair.give(0, m, &ignored, &replied), "");
    EXPECT_TRUE(pair.side[0]->finished());  // broken: nothing more is read from it
    EXPECT_NE(pair.give(0, m, &ignored, &replied), "");
    EXPECT_FALSE(replied);
  }
}

}  // namespace
}  // namespace xccl
