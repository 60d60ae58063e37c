// libFuzzer target: arbitrary bytes as the hellos a TCP connection's other end sends
// (csrc/net/transport/tcp/wire.h HelloExchange), to an acceptor or to a dialer. The first byte
// picks the side and whether each hello is made plausible (magic, version, group set) to reach the
// rank, link and MAC checks. Nothing may pass without the key: an accepted offer names a rank and
// link that exist, and a dialer or an acceptor finishes only on exactly the challenge or proof a
// real peer with the key would send (tests/fuzz/make_seeds.py seeds both, so those paths run too).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "net/transport/tcp/wire.h"

namespace {

using namespace xccl::net::tcp;

// Keep in step with tests/fuzz/make_seeds.py (its seeds carry valid MACs for these).
HandshakeTerms fuzzTerms(int self) {
  HandshakeTerms terms;
  std::memset(terms.key, 7, sizeof(terms.key));
  groupId("fuzz", "token", terms.group);
  terms.self = self;
  terms.links = {2, 0, 4, 4, 4, 4, 4, 4};
  terms.links[self] = 0;
  return terms;
}

const HandshakeTerms kAcceptor = fuzzTerms(1);
const HandshakeTerms kDialer = fuzzTerms(5);
const uint8_t kAcceptorNonce[kNonceBytes] = {0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5,
                                             0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5};
const uint8_t kDialerNonce[kNonceBytes] = {0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a,
                                           0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a};

// The proof a dialer holding the key sends for `offer` after `challenge`.
Hello genuineProof(const Hello& offer, const Hello& challenge) {
  HandshakeTerms terms = kAcceptor;
  terms.self = offer.rank;
  HelloExchange dialer(terms, kAcceptor.self, offer.link, offer.nonce);
  Hello hello;
  dialer.outgoing(&hello);
  if (!dialer.receive(&challenge, sizeof(challenge)).empty()) std::abort();  // our own MAC
  if (!dialer.outgoing(&hello)) std::abort();
  return hello;
}

// The challenge an acceptor holding the key sends with `nonce` for the dialer's `offer`.
Hello genuineChallenge(const Hello& offer, const uint8_t* nonce) {
  HelloExchange acceptor(kAcceptor, nonce);
  if (!acceptor.receive(&offer, sizeof(offer)).empty()) std::abort();  // our own offer
  Hello hello;
  if (!acceptor.outgoing(&hello)) std::abort();
  return hello;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool toDialer = data[0] & 1, plausible = data[0] & 2;
  ++data;
  --size;
  HelloExchange acceptor(kAcceptor, kAcceptorNonce);
  HelloExchange dialer(kDialer, /*peer=*/1, /*link=*/3, kDialerNonce);
  HelloExchange& side = toDialer ? dialer : acceptor;
  Hello sent;
  dialer.outgoing(&sent);
  Hello offer{}, challenge{};
  while (size > 0) {
    const size_t n = size < sizeof(Hello) ? size : sizeof(Hello);
    Hello hello{};
    std::memcpy(&hello, data, n);
    if (plausible) {
      hello.magic = kHelloMagic;
      hello.version = kWireVersion;
      std::memcpy(hello.group, kAcceptor.group, kGroupIdBytes);
    }
    const void* bytes = plausible ? static_cast<const void*>(&hello) : data;
    const size_t length = plausible ? sizeof(Hello) : n;
    data += n;
    size -= n;
    const bool wasWaitingForOffer = !toDialer && acceptor.peer() < 0;
    if (!side.receive(bytes, length).empty()) break;
    if (toDialer) {
      Hello got;
      std::memcpy(&got, bytes, sizeof(got));
      const Hello genuine = genuineChallenge(sent, got.nonce);
      if (!dialer.done() || std::memcmp(got.mac, genuine.mac, sizeof(got.mac)) != 0) std::abort();
      continue;
    }
    if (wasWaitingForOffer) {
      std::memcpy(&offer, bytes, sizeof(offer));
      const int peer = acceptor.peer(), link = acceptor.link();
      if (peer <= 1 || peer > 7 || link < 0 || link >= kAcceptor.links[peer]) std::abort();
      if (!acceptor.outgoing(&challenge)) std::abort();
      continue;
    }
    // Only a proof can have been accepted here: it must be the genuine one.
    if (!acceptor.done()) std::abort();
    Hello proof;
    std::memcpy(&proof, bytes, sizeof(proof));
    const Hello genuine = genuineProof(offer, challenge);
    if (std::memcmp(proof.mac, genuine.mac, sizeof(proof.mac)) != 0) std::abort();
  }
  return 0;
}
