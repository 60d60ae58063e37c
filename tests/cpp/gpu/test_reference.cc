// CPU tests of the GPU tests' reference: if it is wrong, every bitwise GPU comparison is too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "gpu/reference.h"

namespace xccl::testing {
namespace {

uint32_t bitsOf(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return bits;
}

TEST(Half, EveryFiniteValueRoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float v = halfBitsToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(v)) {
      EXPECT_EQ(bits & 0x7c00, 0x7c00u);
      continue;
    }
    ASSERT_EQ(floatToHalfBits(v), bits) << std::hex << bits;
  }
}

TEST(Half, KnownValuesAndTiesToEven) {
  EXPECT_EQ(floatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalfBits(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalfBits(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalfBits(65520.0f), 0x7c00);  // the tie rounds to even: infinity
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);         // tie to even (zero)
  EXPECT_EQ(floatToHalfBits(std::ldexp(3.0f, -25)), 0x0002);         // tie to even (2)
  EXPECT_EQ(floatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie, stays even
  EXPECT_EQ(floatToHalfBits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie, rounds up to even
  EXPECT_EQ(floatToHalfBits(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalfBits(INFINITY), 0x7c00);
  EXPECT_EQ(halfBitsToFloat(0x0400), std::ldexp(1.0f, -14));
}

#if defined(__FLT16_MAX__)
// Cross-check against the compiler's own IEEE binary16 conversion (GCC >= 12 on x86-64).
TEST(Half, MatchesCompilerFloat16OnRandomFloats) {
  std::mt19937 rng(11);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t bits = rng();
    if (i % 2) bits = (bits & 0x8fffffffu) | 0x30000000u;  // bias towards the half range
    float v;
    std::memcpy(&v, &bits, 4);
    if (std::isnan(v)) continue;
    const _Float16 h = static_cast<_Float16>(v);
    uint16_t expected;
    std::memcpy(&expected, &h, 2);
    ASSERT_EQ(floatToHalfBits(v), expected) << std::hexfloat << v;
  }
}
#endif

TEST(BFloat16, RoundTripsAndTiesToEven) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float v = bf16BitsToFloat(static_cast<uint16_t>(bits));
    if (std::isnan(v)) continue;
    ASSERT_EQ(floatToBf16Bits(v), bits) << std::hex << bits;
  }
  EXPECT_EQ(floatToBf16Bits(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie, stays even
  EXPECT_EQ(floatToBf16Bits(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // tie, rounds up to even
  EXPECT_EQ(floatToBf16Bits(1.0f + std::ldexp(5.0f, -10)), 0x3f81); // above the tie
  EXPECT_EQ(floatToBf16Bits(3.4028235e38f), 0x7f80);                 // rounds up to infinity
  EXPECT_EQ(floatToBf16Bits(NAN) & 0x7fc0, 0x7fc0);
}

Bytes floats(std::initializer_list<float> values) {
  Bytes out(values.size() * 4);
  size_t i = 0;
  for (float v : values) std::memcpy(out.data() + 4 * i++, &v, 4);
  return out;
}

float at(const Bytes& b, size_t i) { return loadFloat(DataType::kFloat32, b, i); }

TEST(ReferenceReduce, SumsInRankOrderInFp32) {
  const float tiny = std::ldexp(1.0f, -24);
  // 1 + 2^-24 rounds back to 1 at each step; the reverse order would give 1 + 2^-23.
  const std::vector<Bytes> inputs = {floats({1.0f}), floats({tiny}), floats({tiny})};
  EXPECT_EQ(at(referenceReduce(DataType::kFloat32, ReduceOp::kSum, 1, inputs, 0, 1), 0), 1.0f);
  const std::vector<Bytes> reversed = {floats({tiny}), floats({tiny}), floats({1.0f})};
  EXPECT_EQ(at(referenceReduce(DataType::kFloat32, ReduceOp::kSum, 1, reversed, 0, 1), 0),
            1.0f + 2 * tiny);
}

TEST(ReferenceReduce, HalfAccumulatesInFp32AndRoundsOnce) {
  Bytes a(2), b(2);
  storeFloat(DataType::kFloat16, a, 0, 1.0f);
  storeFloat(DataType::kFloat16, b, 0, std::ldexp(1.0f, -11));  // half an ulp of 1.0 in fp16
  const Bytes out = referenceReduce(DataType::kFloat16, ReduceOp::kSum, 1, {a, b, b}, 0, 1);
  // fp16 accumulation would round 1 + 2^-11 back to 1 twice; fp32 gives exactly 1 + 2^-10.
  EXPECT_EQ(loadFloat(DataType::kFloat16, out, 0), 1.0f + std::ldexp(1.0f, -10));
}

TEST(ReferenceReduce, AvgPreMulMinMaxAndOffsets) {
  const std::vector<Bytes> inputs = {floats({9, 1, -0.0f, 2}), floats({7, 2, 0.0f, NAN}),
                                     floats({5, 4, 1, 3})};
  const auto run = [&](ReduceOp op, float factor, size_t offset, size_t count) {
    return referenceReduce(DataType::kFloat32, op, factor, inputs, offset, count);
  };
  EXPECT_EQ(at(run(ReduceOp::kAvg, 1, 0, 1), 0), 7.0f);
  EXPECT_EQ(at(run(ReduceOp::kAvg, 1, 1, 1), 0), 7.0f / 3.0f);
  EXPECT_EQ(at(run(ReduceOp::kPreMulSum, 0.5f, 0, 2), 1), 3.5f);
  EXPECT_EQ(at(run(ReduceOp::kSum, 0.5f, 0, 1), 0), 21.0f) << "factor ignored for SUM";
  EXPECT_EQ(at(run(ReduceOp::kMin, 1, 0, 2), 1), 1.0f);
  EXPECT_EQ(at(run(ReduceOp::kMax, 1, 0, 1), 0), 9.0f);
  EXPECT_TRUE(std::isnan(at(run(ReduceOp::kMax, 1, 3, 1), 0))) << "NaN propagates";
  EXPECT_TRUE(std::isnan(at(run(ReduceOp::kMin, 1, 3, 1), 0)));
  // Equal zeros keep the earlier rank's sign, as the kernels' comparison does.
  EXPECT_EQ(bitsOf(at(run(ReduceOp::kMax, 1, 2, 1), 0)), bitsOf(1.0f));
  EXPECT_EQ(bitsOf(at(referenceReduce(DataType::kFloat32, ReduceOp::kMin, 1, {inputs[0], inputs[1]},
                                      2, 1),
                      0)),
            bitsOf(-0.0f));
}

TEST(RandomElements, DeterministicVariedAndInRange) {
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    const Bytes a = randomElements(dtype, 1000, 5);
    EXPECT_EQ(a, randomElements(dtype, 1000, 5));
    EXPECT_NE(a, randomElements(dtype, 1000, 6));
    int negative = 0;
    for (size_t i = 0; i < 1000; ++i) {
      const float v = loadFloat(dtype, a, i);
      ASSERT_TRUE(v >= -4.0f && v <= 4.0f) << v;
      negative += v < 0;
    }
    EXPECT_GT(negative, 300);
    EXPECT_LT(negative, 700);
  }
}

TEST(FirstMismatch, ReportsIndexOrNothing) {
  const Bytes a = floats({1, 2, 3});
  EXPECT_EQ(firstMismatch(DataType::kFloat32, a, a), "");
  const Bytes b = floats({1, 2, 4});
  EXPECT_NE(firstMismatch(DataType::kFloat32, a, b).find("element 2"), std::string::npos);
  EXPECT_NE(firstMismatch(DataType::kFloat32, a, floats({1})), "");
  EXPECT_NE(firstMismatch(DataType::kFloat32, floats({0.0f}), floats({-0.0f})), "")
      << "bitwise: the sign of zero counts";
}

}  // namespace
}  // namespace xccl::testing
