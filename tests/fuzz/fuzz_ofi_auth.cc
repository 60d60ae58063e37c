// libFuzzer target: the ofi engine's key exchange (net/transport/ofi/auth.h PeerAuth), fabric-free,
// with an attacker who controls every byte either side receives. Two honest sides, A and B, hold
// the same key; a third set of terms (the impersonator's) differs from B's in one thing the input
// picks: the key, an address, the group, the session, the address split, or nothing but its
// nonce. The input interleaves deliveries into A's or B's `receive` of honest messages (whole,
// truncated or padded, bit-flipped, a byte changed, a MAC transplanted from another message),
// raw bytes of any length and plausible headers with attacker bytes behind them. Messages come
// from a pool: both nonces, the impersonator's, whatever A and B answered, and what fresh
// signers (A's, B's or the impersonator's terms, with any of the nonces) answer to a pool
// message: proofs for other nonces, reflected proofs, proofs of another creation.
//
// Invariants (abort on violation), checked after every delivery:
// - a side proves its peer only on a message whose rank, session, nonce and MAC are exactly those
//   of the proof the peer's terms make, with that nonce, for this side's nonce (a fresh honest
//   signer computes it), and whose nonce is the one the peer sent if a nonce was taken first;
//   such a message to a side that is neither refused nor proven does prove it;
// - a side is refused after every message it refuses, and a refused side is never proven later;
//   proven, answered, refused and finished never go back;
// - receive throws nothing; it replies only to the first well-formed nonce of its peer (always
//   to one, unless the exchange broke), with "" and a well-formed proof of this side's rank,
//   session and nonce whose MAC is the one its terms make for that nonce;
// - the impersonator's proof for A's nonce differs from B's whatever field its terms change; so
//   do B's proofs with another nonce of its own or for another of A's, and A's own proof over the
//   same nonces (reflection), and in a group of three, a proof that differs from B's in the
//   prover's or the verifier's rank alone (the signer behind the first invariant runs the same
//   MAC, so a field left out of it is caught here, not there);
// - in honest mode (config bit 7), both sides get exactly each other's messages in an order the
//   input picks: both end proven, answered and finished, never refused.
//
// Input: byte 0 is the config (bits 0-2 the impersonator's terms, 3-4 the nonces, 5-6 the ranks,
// 7 honest mode); nonce mode 3 reads 32 bytes of nonces next; then op bytes and their fields
// (see the switch). Seeds come from make_seeds.py.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "net/transport/ofi/auth.h"

namespace {

using xccl::net::NetKey;
using xccl::net::ofi::AuthMessage;
using xccl::net::ofi::AuthStep;
using xccl::net::ofi::AuthTerms;
using xccl::net::ofi::kAuthMagic;
using xccl::net::ofi::kAuthNonceBytes;
using xccl::net::ofi::kAuthVersion;
using xccl::net::ofi::PeerAuth;
using Nonce = std::array<uint8_t, kAuthNonceBytes>;

constexpr uint64_t kSession = 0x5e55;
constexpr size_t kMaxPool = 48;
constexpr size_t kMaxRaw = 160;  // past sizeof(AuthMessage) both ways

// Names the invariant that broke (the abort calls merge, and with them their lines).
#define check(ok)                                                                         \
  do {                                                                                    \
    if (!(ok)) {                                                                          \
      std::fprintf(stderr, "fuzz_ofi_auth.cc:%d: invariant broken: %s\n", __LINE__, #ok); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

NetKey keyOf(uint8_t fill) {
  NetKey key;
  key.fill(fill);
  return key;
}

Nonce nonceOf(uint8_t fill) {
  Nonce nonce;
  nonce.fill(fill);
  return nonce;
}

// What the input reads from.
struct Input {
  const uint8_t* data;
  size_t size;
  bool empty() const { return size == 0; }
  uint8_t byte() {
    if (size == 0) return 0;
    --size;
    return *data++;
  }
  uint16_t word() { return uint16_t(byte() | byte() << 8); }
};

// The impersonator's terms: B's, with one thing changed (config bits 0-2).
enum Variant {
  kOtherKey,
  kOtherProverAddress,
  kOtherVerifierAddress,
  kOtherGroup,
  kOtherSession,
  kSwappedAddresses,
  kResplitAddresses,
  kSameTerms
};

struct World {
  int rankA = 0, rankB = 1;
  int variant = kOtherKey;
  AuthTerms termsA, termsB, termsC;  // termsC: the impersonator's, as rank B (self fixed per use)
  Nonce nonceA, nonceB, nonceC, nonceX;
};

AuthTerms honestTerms(int self, int ranks) {
  AuthTerms terms;
  terms.key = keyOf(7);
  terms.group = "pg0/ofi";
  terms.session = kSession;
  terms.self = self;
  const std::vector<std::vector<uint8_t>> addresses = {{1, 2, 3}, {4, 5, 6, 7}, {8, 9}};
  terms.addresses.assign(addresses.begin(), addresses.begin() + ranks);
  return terms;
}

void setUp(World& w, Input& in) {
  const uint8_t config = in.byte();
  w.variant = config & 7;
  static const int kRanks[4][3] = {{0, 1, 2}, {1, 0, 2}, {0, 2, 3}, {2, 1, 3}};  // A, B, size
  const int* ranks = kRanks[(config >> 5) & 3];
  w.rankA = ranks[0];
  w.rankB = ranks[1];
  w.termsA = honestTerms(w.rankA, ranks[2]);
  w.termsB = honestTerms(w.rankB, ranks[2]);
  w.termsC = w.termsB;
  AuthTerms& c = w.termsC;
  std::vector<uint8_t>&a = c.addresses[w.rankA], &b = c.addresses[w.rankB];
  switch (w.variant) {
    case kOtherKey: c.key = keyOf(8); break;
    case kOtherProverAddress: b.back() ^= 0x80; break;
    case kOtherVerifierAddress: a.push_back(0); break;
    case kOtherGroup: c.group = "pg1/ofi"; break;
    case kOtherSession: c.session = kSession + 1; break;
    case kSwappedAddresses: std::swap(a, b); break;
    case kResplitAddresses:  // the same bytes end to end, cut elsewhere
      a.push_back(b.front());
      b.erase(b.begin());
      break;
    default: break;
  }
  w.nonceA = nonceOf(0x10);
  w.nonceB = nonceOf(0x20);
  w.nonceC = nonceOf(0x30);
  w.nonceX = nonceOf(0x40);
  switch ((config >> 3) & 3) {
    case 1: w.nonceB = w.nonceA; break;  // both draws alike: reflection is all that differs
    case 2: w.nonceB = w.nonceA, w.nonceB[kAuthNonceBytes - 1] ^= 1; break;
    case 3:
      for (uint8_t& x : w.nonceA) x = in.byte();
      for (uint8_t& x : w.nonceB) x = in.byte();
      break;
    default: break;
  }
}

// The answer a fresh side with `terms` and `nonce` gives `message` (which must be its peer's
// first nonce, else there is none).
bool answer(const AuthTerms& terms, int peer, const Nonce& nonce, const void* bytes, size_t length,
            AuthMessage* reply) {
  PeerAuth signer(terms, peer, nonce.data());
  bool replied = false;
  const std::string why = signer.receive(bytes, length, reply, &replied);
  if (replied) check(why.empty());
  return replied;
}

// The proof the prover's terms make with `proverNonce` for the verifier's nonce message.
AuthMessage genuineProof(const AuthTerms& prover, int verifier, const uint8_t* proverNonce,
                         const AuthMessage& verifierNonce) {
  Nonce nonce;
  std::memcpy(nonce.data(), proverNonce, nonce.size());
  AuthMessage asked = verifierNonce;
  asked.session = prover.session;  // the prover's group, when its terms differ in that
  AuthMessage proof;
  check(answer(prover, verifier, nonce, &asked, sizeof(asked), &proof));
  return proof;
}

bool sameProof(const AuthMessage& a, const AuthMessage& b) {
  return a.rank == b.rank && a.session == b.session &&
         std::memcmp(a.nonce, b.nonce, sizeof(a.nonce)) == 0 &&
         std::memcmp(a.mac, b.mac, sizeof(a.mac)) == 0;
}

AuthMessage parse(const std::vector<uint8_t>& bytes) {
  AuthMessage message;
  std::memset(&message, 0, sizeof(message));
  std::memcpy(&message, bytes.data(),
              bytes.size() < sizeof(message) ? bytes.size() : sizeof(message));
  return message;
}

// The binding of each field, checked on what the honest code makes: the impersonator's proof
// for A's nonce is not B's, and A's own proof (reflected, rank rewritten) is not B's either.
void checkBindings(const World& w) {
  PeerAuth a(w.termsA, w.rankB, w.nonceA.data());
  const AuthMessage nonceOfA = a.nonceMessage();
  const AuthMessage byB = genuineProof(w.termsB, w.rankA, w.nonceB.data(), nonceOfA);
  if (w.variant != kSameTerms) {
    const AuthMessage byC = genuineProof(w.termsC, w.rankA, w.nonceB.data(), nonceOfA);
    check(std::memcmp(byB.mac, byC.mac, sizeof(byB.mac)) != 0);
  }
  // B's proof with another nonce of its own, or for another nonce of A's.
  const AuthMessage withX = genuineProof(w.termsB, w.rankA, w.nonceX.data(), nonceOfA);
  check(w.nonceX == w.nonceB || std::memcmp(withX.mac, byB.mac, sizeof(byB.mac)) != 0);
  AuthMessage otherNonceOfA = nonceOfA;
  std::memcpy(otherNonceOfA.nonce, w.nonceX.data(), kAuthNonceBytes);
  const AuthMessage forX = genuineProof(w.termsB, w.rankA, w.nonceB.data(), otherNonceOfA);
  check(w.nonceX == w.nonceA || std::memcmp(forX.mac, byB.mac, sizeof(byB.mac)) != 0);
  // A's proof over the very nonces B's proof is over (B's as the prover's, A's as the
  // verifier's) differs from B's only by who proves to whom: reflected, it must not pass.
  AuthMessage nonceOfB = nonceOfA;
  std::memcpy(nonceOfB.nonce, w.nonceA.data(), kAuthNonceBytes);
  nonceOfB.rank = w.rankB;
  const AuthMessage reflected = genuineProof(w.termsA, w.rankB, w.nonceB.data(), nonceOfB);
  check(std::memcmp(reflected.mac, byB.mac, sizeof(byB.mac)) != 0);
  if (w.termsB.addresses.size() < 3) return;
  // The third rank, at B's address, proving to A, and B proving to the third rank at A's
  // address: all that differs from B's proof is one rank.
  const int third = 3 - w.rankA - w.rankB;
  AuthTerms asThird = w.termsB;
  asThird.self = third;
  asThird.addresses[third] = w.termsB.addresses[w.rankB];
  const AuthMessage byThird = genuineProof(asThird, w.rankA, w.nonceB.data(), nonceOfA);
  check(std::memcmp(byThird.mac, byB.mac, sizeof(byB.mac)) != 0);
  AuthTerms toThird = w.termsB;
  toThird.addresses[third] = w.termsB.addresses[w.rankA];
  AuthMessage nonceOfThird = nonceOfA;
  nonceOfThird.rank = third;
  const AuthMessage forThird = genuineProof(toThird, third, w.nonceB.data(), nonceOfThird);
  check(std::memcmp(forThird.mac, byB.mac, sizeof(byB.mac)) != 0);
}

// One honest side under attack, and what the harness knows of it.
struct Side {
  const AuthTerms* terms;  // its own
  const AuthTerms* peerTerms;
  int peer;
  Nonce nonce;
  std::unique_ptr<PeerAuth> auth;
  bool tookNonce = false;  // it answered a nonce of its peer: `peerNonce`
  Nonce peerNonce{};
  bool everRefused = false;

  Side(const AuthTerms& own, const AuthTerms& theirs, const Nonce& n)
      : terms(&own),
        peerTerms(&theirs),
        peer(theirs.self),
        nonce(n),
        auth(std::make_unique<PeerAuth>(own, theirs.self, n.data())) {}
};

// Whether `m` passes every check before the step's own (length aside).
bool plausible(const AuthMessage& m, const Side& side) {
  return m.magic == kAuthMagic && m.version == kAuthVersion && m.session == side.terms->session &&
         m.rank == side.peer;
}

// Delivers `bytes` to `side` and checks every invariant on what it did. Returns its reply, if any.
bool deliver(Side& side, const std::vector<uint8_t>& bytes, AuthMessage* reply) {
  PeerAuth& auth = *side.auth;
  const bool provenBefore = auth.proven(), answeredBefore = auth.answered();
  const bool refusedBefore = auth.refused(), finishedBefore = auth.finished();
  // Broken: finished without having answered (finished() otherwise needs answered()).
  const bool brokenBefore = finishedBefore && !answeredBefore;
  bool replied = false;
  std::string why;
  AuthMessage out;
  std::memset(&out, 0xee, sizeof(out));
  // An exact-size heap copy, so that the sanitizer sees any read past the bytes given.
  const std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size() + 1]);
  std::memcpy(copy.get(), bytes.data(), bytes.size());
  try {
    why = auth.receive(copy.get(), bytes.size(), &out, &replied);
  } catch (...) {
    check(!"receive threw");  // it documents no exception
  }
  // Nothing goes back.
  check(!provenBefore || auth.proven());
  check(!answeredBefore || auth.answered());
  check(!refusedBefore || auth.refused());
  check(!finishedBefore || auth.finished());
  // A refused message refuses the peer; an accepted one changes nothing of that.
  if (!why.empty()) check(auth.refused());
  if (why.empty()) check(auth.refused() == refusedBefore);
  side.everRefused = side.everRefused || auth.refused();

  const bool whole = bytes.size() == sizeof(AuthMessage);
  const AuthMessage m = parse(bytes);
  const bool wellFormed = whole && plausible(m, side);

  // Replies: only to the first well-formed nonce, and always to it unless the exchange broke.
  const bool dueReply =
      wellFormed && m.step == AuthStep::kNonce && !answeredBefore && !brokenBefore;
  check(replied == dueReply);
  if (replied) {
    check(why.empty() && auth.answered());
    check(out.magic == kAuthMagic && out.version == kAuthVersion && out.step == AuthStep::kProof);
    check(out.reserved == 0 && out.reserved2 == 0);
    check(out.rank == side.terms->self && out.session == side.terms->session);
    check(std::memcmp(out.nonce, side.nonce.data(), kAuthNonceBytes) == 0);
    AuthMessage expected;
    check(answer(*side.terms, side.peer, side.nonce, copy.get(), bytes.size(), &expected));
    check(std::memcmp(out.mac, expected.mac, sizeof(out.mac)) == 0);
    side.tookNonce = true;
    std::memcpy(side.peerNonce.data(), m.nonce, kAuthNonceBytes);
    *reply = out;
  }

  // Proofs: the genuine one proves, and nothing else does.
  bool genuine = false;
  if (wellFormed && m.step == AuthStep::kProof) {
    PeerAuth self(*side.terms, side.peer, side.nonce.data());
    const AuthMessage expected =
        genuineProof(*side.peerTerms, side.terms->self, m.nonce, self.nonceMessage());
    genuine =
        sameProof(m, expected) &&
        (!side.tookNonce || std::memcmp(m.nonce, side.peerNonce.data(), kAuthNonceBytes) == 0);
  }
  if (auth.proven() && !provenBefore) {
    check(genuine && why.empty());
    check(!refusedBefore && !auth.refused());  // never proven once refused
  }
  if (genuine && !provenBefore && !refusedBefore) check(auth.proven() && why.empty());
  return replied;
}

// Honest mode: each side gets exactly the other's nonce and proof, in an order the input picks.
void honestRun(World& w, Input& in) {
  Side a(w.termsA, w.termsB, w.nonceA), b(w.termsB, w.termsA, w.nonceB);
  Side* sides[2] = {&a, &b};
  AuthMessage proofs[2];  // proofs[i]: the proof side i made, for the other side
  bool nonceSent[2] = {}, proofMade[2] = {}, proofSent[2] = {};
  for (int step = 0; step < 4; ++step) {
    // The events still due: side i's nonce to the other (i), side i's proof to the other (2 + i).
    int due[4], count = 0;
    for (int i = 0; i < 2; ++i) {
      if (!nonceSent[i]) due[count++] = i;
      if (proofMade[i] && !proofSent[i]) due[count++] = 2 + i;
    }
    check(count > 0);
    const int event = due[in.byte() % count];
    const int from = event % 2, to = 1 - from;
    AuthMessage message = event < 2 ? sides[from]->auth->nonceMessage() : proofs[from];
    std::vector<uint8_t> bytes(sizeof(message));
    std::memcpy(bytes.data(), &message, sizeof(message));
    AuthMessage reply;
    const bool replied = deliver(*sides[to], bytes, &reply);
    check(replied == (event < 2));
    if (event < 2) {
      nonceSent[from] = true;
      proofs[to] = reply;
      proofMade[to] = true;
    } else {
      proofSent[from] = true;
    }
  }
  for (Side* side : sides) {
    check(side->auth->proven() && side->auth->answered() && side->auth->finished());
    check(!side->auth->refused() && !side->everRefused);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Input in{data, size};
  const bool honest = data[0] & 0x80;
  World w;
  setUp(w, in);
  checkBindings(w);
  if (honest) {
    honestRun(w, in);
    return 0;
  }

  Side a(w.termsA, w.termsB, w.nonceA), b(w.termsB, w.termsA, w.nonceB);
  Side* sides[2] = {&a, &b};
  // The impersonator's terms as B (to A) and as A (to B).
  AuthTerms cAsB = w.termsC, cAsA = w.termsC;
  cAsA.self = w.rankA;
  const AuthTerms* signers[4] = {&w.termsA, &w.termsB, &cAsB, &cAsA};
  const Nonce* nonces[4] = {&w.nonceA, &w.nonceB, &w.nonceC, &w.nonceX};

  std::vector<std::vector<uint8_t>> pool;
  auto add = [&](const AuthMessage& m) {
    if (pool.size() >= kMaxPool) return;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&m);
    pool.emplace_back(p, p + sizeof(m));
  };
  add(a.auth->nonceMessage());
  add(b.auth->nonceMessage());
  add(PeerAuth(cAsB, w.rankA, w.nonceC.data()).nonceMessage());
  add(PeerAuth(cAsA, w.rankB, w.nonceC.data()).nonceMessage());

  while (!in.empty()) {
    const uint8_t op = in.byte();
    Side& side = *sides[(op >> 3) & 1];
    std::vector<uint8_t> bytes = pool[in.byte() % pool.size()];
    switch (op & 7) {
      case 0: break;  // as it was sent
      case 1: {  // cut short or padded with attacker bytes
        const size_t length = in.byte() % (kMaxRaw + 1);
        const size_t kept = bytes.size();
        bytes.resize(length);
        for (size_t i = kept; i < length; ++i) bytes[i] = in.byte();
        break;
      }
      case 2: {  // one bit flipped
        const uint16_t bit = in.word() % (bytes.size() * 8);
        bytes[bit / 8] ^= uint8_t(1 << (bit % 8));
        break;
      }
      case 3: {  // one byte changed (rank, step, session, nonce, MAC...)
        const uint8_t at = in.byte() % bytes.size();
        bytes[at] ^= in.byte() | 1;
        break;
      }
      case 4: {  // raw attacker bytes of any length
        const size_t length = in.byte() % (kMaxRaw + 1);
        bytes.resize(length);
        for (size_t i = 0; i < length; ++i) bytes[i] = in.byte();
        break;
      }
      case 5: {  // a plausible header (from the pool message) over attacker nonce and MAC
        AuthMessage m = parse(bytes);
        m.step = (in.byte() & 1) ? AuthStep::kProof : AuthStep::kNonce;
        for (uint8_t& x : m.nonce) x = in.byte();
        for (uint8_t& x : m.mac) x = in.byte();
        bytes.assign(reinterpret_cast<uint8_t*>(&m), reinterpret_cast<uint8_t*>(&m) + sizeof(m));
        break;
      }
      case 6: {  // a fresh signer's answer to the pool message joins the pool; nothing delivered
        const uint8_t pick = in.byte();
        const AuthTerms& signer = *signers[pick & 3];
        const int peer = signer.self == w.rankA ? w.rankB : w.rankA;
        AuthMessage asked = parse(bytes);  // in the signer's session, when its terms differ
        asked.session = signer.session;
        if (bytes.size() == sizeof(asked)) std::memcpy(bytes.data(), &asked, sizeof(asked));
        AuthMessage reply;
        if (answer(signer, peer, *nonces[(pick >> 2) & 3], bytes.data(), bytes.size(), &reply)) {
          add(reply);
        }
        continue;
      }
      case 7: {  // the MAC (and nonce) of another pool message transplanted
        const std::vector<uint8_t>& donor = pool[in.byte() % pool.size()];
        const size_t start =
            (op & 0x10) ? offsetof(AuthMessage, nonce) : offsetof(AuthMessage, mac);
        for (size_t i = start; i < sizeof(AuthMessage) && i < bytes.size() && i < donor.size();
             ++i) {
          bytes[i] = donor[i];
        }
        break;
      }
    }
    AuthMessage reply;
    if (deliver(side, bytes, &reply)) add(reply);
  }
  return 0;
}
