// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for authenticating TCP links
// (net/transport/tcp/wire.h). Written here rather than taken from a crypto library: OpenSSL cannot
// be assumed on users' machines, and the handshake needs nothing more. Not constant time in the
// message length (lengths are public); digestsEqual() compares in constant time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace xccl::crypto {

using Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t bytes);
  Digest finish();  // the object must not be updated afterwards

 private:
  void block(const uint8_t* data);
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t totalBytes_ = 0;
};

Digest sha256(const void* data, size_t bytes);

// HMAC-SHA256 over the concatenation of `parts` (so callers need not build one buffer).
struct Span {
  const void* data;
  size_t bytes;
};
Digest hmacSha256(const void* key, size_t keyBytes, const Span* parts, size_t count);

// Equal without a data-dependent early exit: a forger learns nothing from the timing.
bool digestsEqual(const uint8_t* a, const uint8_t* b, size_t bytes);

}  // namespace xccl::crypto
