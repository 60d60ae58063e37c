#include "net/transport/ofi/auth.h"

#include <cstring>

#include "common/sha256.h"

namespace xccl::net::ofi {

PeerAuth::PeerAuth(const AuthTerms& terms, int peer, const uint8_t nonce[kAuthNonceBytes])
    : terms_(terms), peer_(peer) {
  std::memcpy(mine_, nonce, kAuthNonceBytes);
}

AuthMessage PeerAuth::nonceMessage() const {
  AuthMessage message;
  message.step = AuthStep::kNonce;
  message.rank = terms_.self;
  message.session = terms_.session;
  std::memcpy(message.nonce, mine_, kAuthNonceBytes);
  return message;
}

void PeerAuth::mac(int prover, int verifier, const uint8_t* proverNonce,
                   const uint8_t* verifierNonce, uint8_t out[32]) const {
  // Fixed-size fields and length-prefixed variable ones, in one order on both ends: no two
  // different exchanges hash alike.
  const char kLabel[] = "xccl ofi proof";
  const uint16_t version = kAuthVersion;
  const uint64_t groupBytes = terms_.group.size();
  const int32_t proverRank = prover, verifierRank = verifier;
  const std::vector<uint8_t>& proverAddress = terms_.addresses[prover];
  const std::vector<uint8_t>& verifierAddress = terms_.addresses[verifier];
  const uint64_t proverBytes = proverAddress.size(), verifierBytes = verifierAddress.size();
  const crypto::Span parts[] = {{kLabel, sizeof(kLabel)},
                                {&version, sizeof(version)},
                                {&groupBytes, sizeof(groupBytes)},
                                {terms_.group.data(), terms_.group.size()},
                                {&terms_.session, sizeof(terms_.session)},
                                {&proverRank, sizeof(proverRank)},
                                {&verifierRank, sizeof(verifierRank)},
                                {proverNonce, kAuthNonceBytes},
                                {verifierNonce, kAuthNonceBytes},
                                {&proverBytes, sizeof(proverBytes)},
                                {proverAddress.data(), proverAddress.size()},
                                {&verifierBytes, sizeof(verifierBytes)},
                                {verifierAddress.data(), verifierAddress.size()}};
  const crypto::Digest digest = crypto::hmacSha256(terms_.key.data(), terms_.key.size(), parts,
                                                   sizeof(parts) / sizeof(parts[0]));
  std::memcpy(out, digest.data(), digest.size());
}

std::string PeerAuth::receive(const void* bytes, size_t length, AuthMessage* reply, bool* replied) {
  *replied = false;
  const std::string who = "rank " + std::to_string(peer_);
  if (broken_) return who + " was refused before";
  broken_ = true;  // until this message is found well-formed
  if (length != sizeof(AuthMessage)) {
    return who + " sent a " + std::to_string(length) + "-byte key exchange message";
  }
  AuthMessage message;
  std::memcpy(&message, bytes, sizeof(message));
  if (message.magic != kAuthMagic || message.session != terms_.session) {
    return who + "'s key exchange is not of this group (magic or session differ)";
  }
  if (message.version != kAuthVersion) {
    return who + " speaks key exchange version " + std::to_string(message.version) +
           " (this build: " + std::to_string(kAuthVersion) + ")";
  }
  if (message.rank != peer_) {
    return who + "'s endpoint sent a key exchange message as rank " + std::to_string(message.rank);
  }
  switch (message.step) {
    case AuthStep::kNonce: {
      if (haveTheirs_) return who + " sent a second nonce";
      broken_ = false;
      std::memcpy(theirs_, message.nonce, kAuthNonceBytes);
      haveTheirs_ = true;
      AuthMessage proof;
      proof.step = AuthStep::kProof;
      proof.rank = terms_.self;
      proof.session = terms_.session;
      std::memcpy(proof.nonce, mine_, kAuthNonceBytes);
      mac(terms_.self, peer_, mine_, theirs_, proof.mac);
      *reply = proof;
      *replied = true;
      answered_ = true;
      return {};
    }
    case AuthStep::kProof: {
      if (proven_ || failed_) return who + " sent a second proof";
      broken_ = false;
      failed_ = true;  // until the proof passes
      if (haveTheirs_ && !crypto::digestsEqual(theirs_, message.nonce, kAuthNonceBytes)) {
        return who + "'s proof names another nonce than the one it sent";
      }
      uint8_t expected[32];
      mac(peer_, terms_.self, message.nonce, mine_, expected);
      if (!crypto::digestsEqual(expected, message.mac, sizeof(expected))) {
        return who +
               " did not prove it holds this job's key (XCCL_NET_KEY_FILE differs, or it is not "
               "of this job)";
      }
      failed_ = false;
      proven_ = true;
      return {};
    }
  }
  return who + " sent key exchange step " + std::to_string(int{uint8_t(message.step)});
}

}  // namespace xccl::net::ofi
