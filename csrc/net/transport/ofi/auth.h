// The key-based challenge-response the ofi engine runs at group creation when XCCL_NET_KEY_FILE
// is set (docs/network.md, "What each engine guarantees"), carried over the fabric's own tagged
// messages (tag kAuthTag), fabric-free here so that tests and fuzzers drive it without an
// endpoint.
//
// Every pair of ranks runs it once, symmetrically: each side sends the other a fresh nonce
// (kNonce), and answers the other's nonce with its proof (kProof): an HMAC-SHA256 with the job's
// key (net_key.h) over the wire version, the group (store prefix and session token), the prover's
// and the verifier's rank, both nonces and both fabric addresses. A proof is bound to the
// verifier's fresh nonce (a recorded one is worthless at the next creation), names its prover
// (a rank's own proof cannot be reflected back to it as the peer's) and the endpoint addresses the
// ranks hold for each other (a proof made for another endpoint does not pass here).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "net/rendezvous/net_key.h"

namespace xccl::net::ofi {

constexpr uint64_t kAuthTag = 2;
constexpr uint32_t kAuthMagic = 0x58434f41;  // "XCOA"
constexpr uint16_t kAuthVersion = 1;
constexpr size_t kAuthNonceBytes = 16;

enum class AuthStep : uint8_t { kNonce = 1, kProof = 2 };

struct AuthMessage {
  uint32_t magic = kAuthMagic;
  uint16_t version = kAuthVersion;
  AuthStep step = AuthStep::kNonce;
  uint8_t reserved = 0;
  int32_t rank = 0;  // the sender's
  uint32_t reserved2 = 0;
  uint64_t session = 0;
  uint8_t nonce[kAuthNonceBytes] = {};  // the sender's (kNonce and kProof alike)
  uint8_t mac[32] = {};                 // kProof
};
static_assert(sizeof(AuthMessage) == 72, "the key exchange is part of the wire format");

// What every rank of one group shares, and what it alone knows.
struct AuthTerms {
  NetKey key{};
  std::string group;  // the group's store prefix
  uint64_t session = 0;
  int self = 0;
  std::vector<std::vector<uint8_t>> addresses;  // by rank: the fabric address (fi_getname)
};

// This rank's side of the exchange with one peer.
class PeerAuth {
 public:
  // `nonce`: fresh random bytes (randomBytes), drawn for this peer alone.
  PeerAuth(const AuthTerms& terms, int peer, const uint8_t nonce[kAuthNonceBytes]);

  // The first message to send the peer.
  AuthMessage nonceMessage() const;
  // A message the fabric says came from the peer's address. Returns why it is refused (the peer
  // failed to prove the key, or broke the exchange: nothing of it may be accepted), else "".
  // *reply is set to a message to send the peer, and *replied to true, when one is due. A nonce
  // is answered even after the peer's proof failed, so that the peer learns why rather than
  // waiting; anything malformed ends the exchange with the peer for good.
  std::string receive(const void* bytes, size_t length, AuthMessage* reply, bool* replied);
  // Whether the peer proved it holds the key.
  bool proven() const { return proven_; }
  // Whether this rank answered the peer's nonce with its own proof.
  bool answered() const { return answered_; }
  // Whether the peer is refused (a failed proof, or a malformed message).
  bool refused() const { return failed_ || broken_; }
  // Whether nothing more is due either way: the peer broke the exchange, or this rank answered
  // its nonce and its proof was checked.
  bool finished() const { return broken_ || (answered_ && (proven_ || failed_)); }

 private:
  void mac(int prover, int verifier, const uint8_t* proverNonce, const uint8_t* verifierNonce,
           uint8_t out[32]) const;

  const AuthTerms& terms_;
  const int peer_;
  uint8_t mine_[kAuthNonceBytes] = {}, theirs_[kAuthNonceBytes] = {};
  bool haveTheirs_ = false, answered_ = false, proven_ = false;
  bool failed_ = false;  // its proof did not pass
  bool broken_ = false;  // it sent something malformed: nothing more is read from it
};

}  // namespace xccl::net::ofi
