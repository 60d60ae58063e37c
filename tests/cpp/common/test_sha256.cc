// SHA-256 against the FIPS 180-4 examples (NIST's "SHA256.pdf" and the long-message vector) and
// HMAC-SHA256 against RFC 4231's test cases (the RFC 2104 construction with SHA-256).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/sha256.h"

namespace xccl::crypto {
namespace {

std::string hex(const Digest& digest) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (uint8_t b : digest) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

std::string hmacHex(const std::string& key, const std::string& text) {
  const Span part{text.data(), text.size()};
  return hex(hmacSha256(key.data(), key.size(), &part, 1));
}

TEST(Sha256, NistExamples) {
  EXPECT_EQ(hex(sha256("abc", 3)),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("", 0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(hex(sha256(two.data(), two.size())),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, OneMillionAsInUnevenPieces) {
  // Fed in pieces that straddle block boundaries, so the buffering is exercised too.
  Sha256 hash;
  const std::string piece(997, 'a');
  size_t fed = 0;
  while (fed < 1000000) {
    const size_t n = std::min(piece.size(), size_t{1000000} - fed);
    hash.update(piece.data(), n);
    fed += n;
  }
  EXPECT_EQ(hex(hash.finish()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingAtEveryLengthAroundABlock) {
  // Lengths 55, 56 and 64 put the length field in the same or the next block: one-shot and
  // byte-by-byte hashing must agree.
  for (size_t length : {55u, 56u, 63u, 64u, 65u, 119u, 120u}) {
    const std::string text(length, 'x');
    Sha256 bytewise;
    for (char c : text) bytewise.update(&c, 1);
    EXPECT_EQ(hex(bytewise.finish()), hex(sha256(text.data(), text.size()))) << length;
  }
}

TEST(HmacSha256, Rfc4231TestCases) {
  EXPECT_EQ(hmacHex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hmacHex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hmacHex(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  // Test case 6: a key longer than the block is hashed first.
  EXPECT_EQ(hmacHex(std::string(131, '\xaa'),
                    "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(HmacSha256, PartsAreTheirConcatenation) {
  const std::string key = "k", a = "what do ya ", b = "want for nothing?";
  const Span parts[] = {{a.data(), a.size()}, {b.data(), b.size()}};
  EXPECT_EQ(hex(hmacSha256(key.data(), key.size(), parts, 2)), hmacHex(key, a + b));
}

TEST(HmacSha256, DigestsEqualComparesEveryByte) {
  Digest a{}, b{};
  EXPECT_TRUE(digestsEqual(a.data(), b.data(), a.size()));
  b[31] = 1;
  EXPECT_FALSE(digestsEqual(a.data(), b.data(), a.size()));
}

}  // namespace
}  // namespace xccl::crypto
