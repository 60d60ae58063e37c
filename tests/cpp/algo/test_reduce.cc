// Element-wise reductions, AVG/PREMUL_SUM passes and the 16-bit float conversions (reduce.h).
#include <cmath>
#include <cstring>
#include <limits>

#include "algo/reduce.h"
#include "algo_testing.h"
#include "bits.h"

namespace xccl {
namespace {

using algo::bfloat16ToFloat;
using algo::floatToBfloat16;
using algo::floatToHalf;
using algo::halfToFloat;
using testing::bitCast;
using testing::combineExact;
using testing::isBitwise;
using testing::matches;
using testing::throwsError;
using testing::TypedBuffer;

constexpr DataType kAllTypes[] = {
    DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16,
    DataType::kInt8,    DataType::kUInt8,   DataType::kInt16,   DataType::kInt32,
    DataType::kInt64,   DataType::kBool,
};
constexpr ReduceOp kCombiners[] = {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin,
                                   ReduceOp::kMax, ReduceOp::kBand,    ReduceOp::kBor,
                                   ReduceOp::kBxor};

// Operands whose pairwise sums and products are exact in `type` (|11 * 11| fits int8 and bf16).
std::vector<double> operandsFor(DataType type) {
  if (type == DataType::kBool) return {0, 1};
  if (type == DataType::kUInt8) return {0, 1, 2, 3, 7, 12, 15};
  return {-11, -7, -3, -1, 0, 1, 2, 5, 11};
}

TEST(Reduce, EveryTypeAndCombiner) {
  // Longer than reduce16's 1024-element block and not a multiple of any vector width.
  constexpr size_t kCount = 2600;
  constexpr size_t kGuard = 5;  // elements past `count` that must stay untouched
  for (DataType type : kAllTypes) {
    const std::vector<double> v = operandsFor(type);
    const size_t k = v.size();
    for (ReduceOp op : kCombiners) {
      SCOPED_TRACE(std::string(dataTypeName(type)) + " " + reduceOpName(op));
      TypedBuffer dst(type, kCount + kGuard), src(type, kCount + kGuard);
      for (size_t i = 0; i < kCount + kGuard; ++i) {  // i < k*k covers every pair of operands
        dst.set(i, v[i % k]);
        src.set(i, v[(i / k) % k]);
      }
      if (isFloating(type) && isBitwise(op)) {
        EXPECT_TRUE(throwsError(
            ErrorKind::kInvalidArgument,
            [&] { algo::reduceInto(type, op, dst.data(), src.data(), kCount); }, reduceOpName(op)));
        continue;
      }
      algo::reduceInto(type, op, dst.data(), src.data(), kCount);
      EXPECT_TRUE(matches(dst, [&](size_t i) {
        return i < kCount ? combineExact(type, op, v[i % k], v[(i / k) % k]) : v[i % k];
      }));
      EXPECT_TRUE(matches(src, [&](size_t i) { return v[(i / k) % k]; }));
      algo::reduceInto(type, op, nullptr, nullptr, 0);  // empty is fine for every valid pair
    }
  }
}

TEST(Reduce, BoolCombinersAreLogical) {
  const struct {
    ReduceOp op;
    uint8_t table[4];  // result for (a, b) = (0,0), (0,1), (1,0), (1,1)
  } cases[] = {
      {ReduceOp::kSum, {0, 1, 1, 1}},  {ReduceOp::kMax, {0, 1, 1, 1}},
      {ReduceOp::kBor, {0, 1, 1, 1}},  {ReduceOp::kProduct, {0, 0, 0, 1}},
      {ReduceOp::kMin, {0, 0, 0, 1}},  {ReduceOp::kBand, {0, 0, 0, 1}},
      {ReduceOp::kBxor, {0, 1, 1, 0}},
  };
  for (const auto& c : cases) {
    uint8_t dst[4] = {0, 0, 1, 1};
    const uint8_t src[4] = {0, 1, 0, 1};
    algo::reduceInto(DataType::kBool, c.op, dst, src, 4);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(dst[i], c.table[i]) << reduceOpName(c.op) << " case " << i;
    }
  }
}

TEST(Reduce, CombinerOf) {
  EXPECT_EQ(algo::combinerOf(ReduceOp::kAvg), ReduceOp::kSum);
  EXPECT_EQ(algo::combinerOf(ReduceOp::kPreMulSum), ReduceOp::kSum);
  for (ReduceOp op : kCombiners) EXPECT_EQ(algo::combinerOf(op), op);
}

TEST(Reduce, NonCombinersAreRejected) {
  for (DataType type : kAllTypes) {
    for (ReduceOp op : {ReduceOp::kAvg, ReduceOp::kPreMulSum}) {
      TypedBuffer dst(type, 3), src(type, 3);
      EXPECT_TRUE(throwsError(ErrorKind::kInvalidArgument,
                              [&] { algo::reduceInto(type, op, dst.data(), src.data(), 3); }))
          << dataTypeName(type) << " " << reduceOpName(op);
    }
  }
}

TEST(Reduce, FloatMinMaxPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // NaN on either side or both, then ordinary and infinite operands.
  const double a[] = {nan, 1, nan, -inf, 2, -3};
  const double b[] = {1, nan, nan, nan, inf, -inf};
  for (DataType type :
       {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
      TypedBuffer dst(type, 6), src(type, 6);
      for (size_t i = 0; i < 6; ++i) dst.set(i, a[i]), src.set(i, b[i]);
      algo::reduceInto(type, op, dst.data(), src.data(), 6);
      std::string what = std::string(dataTypeName(type)) + " " + reduceOpName(op);
      for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(std::isnan(dst.get(i))) << what << " at " << i;
      EXPECT_EQ(dst.get(4), op == ReduceOp::kMin ? 2 : inf) << what;
      EXPECT_EQ(dst.get(5), op == ReduceOp::kMin ? -inf : -3) << what;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// float16

// IEEE binary16 decoded from its fields, independently of halfToFloat.
double halfValue(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double magnitude = exp == 0x1f ? (mant ? std::nan("") : INFINITY)
                     : exp == 0  ? std::ldexp(mant, -24)
                                 : std::ldexp(1024 + mant, exp - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

bool isHalfNaN(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

TEST(Half, DecodesEveryBitPattern) {
  int wrong = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = halfToFloat(static_cast<uint16_t>(h));
    double want = halfValue(static_cast<uint16_t>(h));
    bool ok = std::isnan(want) ? std::isnan(f) : f == want;
    ok = ok && std::signbit(f) == ((h & 0x8000) != 0);
    if (!ok && wrong++ < 5) {
      ADD_FAILURE() << std::hex << "0x" << h << " -> " << f << ", want " << want;
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(Half, EveryBitPatternRoundTripsThroughFloat) {
  int wrong = 0;
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    uint16_t back = floatToHalf(halfToFloat(static_cast<uint16_t>(h)));
    bool ok = isHalfNaN(static_cast<uint16_t>(h))
                  ? (isHalfNaN(back) && (back & 0x8000) == (h & 0x8000))  // NaN stays NaN
                  : back == h;
    if (!ok && wrong++ < 5) ADD_FAILURE() << std::hex << "0x" << h << " came back as 0x" << back;
  }
  EXPECT_EQ(wrong, 0);
}

// For every pair of adjacent finite halves (including the largest finite and infinity): the
// float exactly halfway rounds to the even one, its float neighbours to the nearer half.
TEST(Half, RoundsToNearestEvenAtEveryMidpoint) {
  int wrong = 0;
  auto check = [&](float f, uint16_t want) {
    for (float s : {1.0f, -1.0f}) {
      uint16_t got = floatToHalf(s * f);
      uint16_t expected = static_cast<uint16_t>(want | (s < 0 ? 0x8000 : 0));
      if (got != expected && wrong++ < 5) {
        ADD_FAILURE() << s * f << " -> 0x" << std::hex << got << ", want 0x" << expected;
      }
    }
  };
  for (uint16_t h = 0; h < 0x7c00; ++h) {
    const uint16_t next = static_cast<uint16_t>(h + 1);
    // 11-bit significands: the midpoint has 12 and is exact in float.
    const double upper = next == 0x7c00 ? 65536.0 : halfValue(next);
    const float mid = static_cast<float>((halfValue(h) + upper) / 2);
    check(static_cast<float>(halfValue(h)), h);
    check(mid, (h & 1) ? next : h);
    check(std::nextafter(mid, 0.0f), h);
    check(std::nextafter(mid, INFINITY), next);
  }
  EXPECT_EQ(wrong, 0);
}

// Sampled over the whole float range against an independent rounding: scale by the half ulp
// at that magnitude and let nearbyint (ties to even) pick the integer.
TEST(Half, MatchesReferenceRoundingOverFloatRange) {
  int wrong = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4093) {
    const float f = bitCast<float>(static_cast<uint32_t>(bits));
    const uint16_t h = floatToHalf(f);
    const float got = halfToFloat(h);
    bool ok;
    if (std::isnan(f)) {
      ok = isHalfNaN(h) && std::signbit(got) == std::signbit(f);
    } else {
      const double a = std::fabs(f);
      double want = INFINITY;
      if (a < 65520.0) {  // halfway between the largest half (65504) and 65536
        const int exp = a == 0 ? -14 : std::max(std::ilogb(a), -14);
        const double ulp = std::ldexp(1.0, exp - 10);
        want = std::nearbyint(a / ulp) * ulp;
      }
      ok = std::fabs(got) == want && std::signbit(got) == std::signbit(f);
    }
    if (!ok && wrong++ < 5) ADD_FAILURE() << f << " -> " << got << std::hex << " (0x" << h << ")";
  }
  EXPECT_EQ(wrong, 0);
}

TEST(Half, SpecialValues) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(0.1f), 0x2e66);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(floatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(floatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(floatToHalf(INFINITY), 0x7c00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xfc00);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // halfway to it: ties to even zero
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(floatToHalf(1e-30f), 0x0000);
  EXPECT_EQ(floatToHalf(-1e-30f), 0x8000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_TRUE(isHalfNaN(floatToHalf(std::nanf(""))));
  EXPECT_TRUE(isHalfNaN(floatToHalf(bitCast<float>(0x7f800001))));  // signalling, tiny payload
  EXPECT_TRUE(isHalfNaN(floatToHalf(bitCast<float>(0xffc00000))));
  EXPECT_EQ(floatToHalf(bitCast<float>(0xffc00000)) & 0x8000, 0x8000);
}

// ---------------------------------------------------------------------------------------------
// bfloat16

bool isBf16NaN(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

TEST(BFloat16, DecodesAndRoundTripsEveryBitPattern) {
  int wrong = 0;
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = bfloat16ToFloat(static_cast<uint16_t>(b));
    const uint16_t back = floatToBfloat16(f);
    bool ok = bitCast<uint32_t>(f) == b << 16;  // bfloat16 is the top half of a float
    ok = ok &&
         (isBf16NaN(static_cast<uint16_t>(b)) ? (isBf16NaN(back) && (back & 0x8000) == (b & 0x8000))
                                              : back == b);
    if (!ok && wrong++ < 5) ADD_FAILURE() << std::hex << "0x" << b << " came back as 0x" << back;
  }
  EXPECT_EQ(wrong, 0);
}

TEST(BFloat16, RoundsToNearestEvenAtEveryMidpoint) {
  int wrong = 0;
  for (uint32_t b = 0; b < 0x7f80; ++b) {  // every finite positive; 0x7f7f's next is infinity
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint32_t mid = ((b | sign) << 16) | 0x8000;
      const uint32_t up = (b + 1) | sign, down = b | sign;
      const uint32_t input[3] = {mid, mid - 1, mid + 1};
      const uint32_t want[3] = {(b & 1) ? up : down, down, up};
      for (int i = 0; i < 3; ++i) {
        const uint16_t got = floatToBfloat16(bitCast<float>(input[i]));
        if (got != want[i] && wrong++ < 5) {
          ADD_FAILURE() << std::hex << "float 0x" << input[i] << " -> 0x" << got << ", want 0x"
                        << want[i];
        }
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(BFloat16, MatchesReferenceRoundingOverFloatRange) {
  const double maxFinite = std::ldexp(255.0, 127 - 7);  // 0x7f7f
  int wrong = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 4093) {
    const float f = bitCast<float>(static_cast<uint32_t>(bits));
    const uint16_t b = floatToBfloat16(f);
    const float got = bfloat16ToFloat(b);
    bool ok;
    if (std::isnan(f)) {
      ok = isBf16NaN(b) && std::signbit(got) == std::signbit(f);
    } else {
      const double a = std::fabs(f);
      const int exp = a == 0 ? -126 : std::max(std::ilogb(a), -126);
      const double ulp = std::ldexp(1.0, exp - 7);
      double want = std::nearbyint(a / ulp) * ulp;
      if (want > maxFinite) want = INFINITY;
      ok = std::fabs(got) == want && std::signbit(got) == std::signbit(f);
    }
    if (!ok && wrong++ < 5) ADD_FAILURE() << f << " -> " << got << std::hex << " (0x" << b << ")";
  }
  EXPECT_EQ(wrong, 0);
}

TEST(BFloat16, SpecialValues) {
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBfloat16(1.0f / 3.0f), 0x3eab);
  EXPECT_EQ(floatToBfloat16(INFINITY), 0x7f80);
  EXPECT_EQ(floatToBfloat16(-INFINITY), 0xff80);
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(floatToBfloat16(-0.0f), 0x8000);
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  // A NaN whose payload lies only in the low half must not truncate to infinity.
  EXPECT_TRUE(isBf16NaN(floatToBfloat16(bitCast<float>(0x7f800001))));
  EXPECT_TRUE(isBf16NaN(floatToBfloat16(bitCast<float>(0xff800001))));
  EXPECT_EQ(floatToBfloat16(bitCast<float>(0xff800001)) & 0x8000, 0x8000);
  EXPECT_TRUE(isBf16NaN(floatToBfloat16(bitCast<float>(0x7fffffff))));  // must not carry into sign
  EXPECT_TRUE(isBf16NaN(floatToBfloat16(std::nanf(""))));
}

// ---------------------------------------------------------------------------------------------
// scale (PREMUL_SUM) and divide (AVG)

TEST(Scale, FloatingTypes) {
  const double in[] = {1, -2, 3.5, 0, 1024};
  for (DataType type :
       {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16}) {
    for (double factor : {0.5, -4.0, 1.0}) {
      TypedBuffer data(type, 5);
      for (size_t i = 0; i < 5; ++i) data.set(i, in[i]);
      algo::scale(type, data.data(), 4, factor);  // the last element is outside `count`
      EXPECT_TRUE(matches(data, [&](size_t i) { return i < 4 ? in[i] * factor : in[i]; }))
          << dataTypeName(type) << " x " << factor;
    }
  }
  // The product is rounded once, to nearest, in the element type.
  uint16_t h = floatToHalf(1.0f);
  algo::scale(DataType::kFloat16, &h, 1, 1.0 / 3.0);
  EXPECT_EQ(h, 0x3555);
  uint16_t b = floatToBfloat16(1.0f);
  algo::scale(DataType::kBFloat16, &b, 1, 1.0 / 3.0);
  EXPECT_EQ(b, 0x3eab);
  h = floatToHalf(60000.0f);
  algo::scale(DataType::kFloat16, &h, 1, 2.0);
  EXPECT_EQ(h, 0x7c00);  // overflows to infinity
  float f = 3.0f;
  algo::scale(DataType::kFloat32, &f, 1, 0.1);  // the factor is used as float for float data
  EXPECT_EQ(f, 3.0f * 0.1f);
}

TEST(Scale, RejectsIntegersAndBool) {
  for (DataType type : kAllTypes) {
    if (isFloating(type)) continue;
    TypedBuffer data(type, 2);
    EXPECT_TRUE(throwsError(
        ErrorKind::kInvalidArgument, [&] { algo::scale(type, data.data(), 2, 2.0); },
        dataTypeName(type)));
  }
}

TEST(Divide, IntegersTruncateTowardZero) {
  const double in[] = {-7, 7, -1, 1, -6, 0, 9, -9};
  const double by2[] = {-3, 3, 0, 0, -3, 0, 4, -4};
  const double by4[] = {-1, 1, 0, 0, -1, 0, 2, -2};
  for (DataType type : {DataType::kInt8, DataType::kInt16, DataType::kInt32, DataType::kInt64}) {
    for (int64_t divisor : {2, 4}) {
      TypedBuffer data(type, 8);
      for (size_t i = 0; i < 8; ++i) data.set(i, in[i]);
      algo::divide(type, data.data(), 8, divisor);
      EXPECT_TRUE(matches(data, [&](size_t i) { return divisor == 2 ? by2[i] : by4[i]; }))
          << dataTypeName(type) << " / " << divisor;
    }
  }
  int8_t i8[] = {-128, 127};
  algo::divide(DataType::kInt8, i8, 2, 3);
  EXPECT_EQ(i8[0], -42);
  EXPECT_EQ(i8[1], 42);
  uint8_t u8[] = {255, 7, 3};
  algo::divide(DataType::kUInt8, u8, 3, 4);
  EXPECT_EQ(u8[0], 63);
  EXPECT_EQ(u8[1], 1);
  EXPECT_EQ(u8[2], 0);
  int64_t i64[] = {std::numeric_limits<int64_t>::min(), -9000000000000000001, 5};
  algo::divide(DataType::kInt64, i64, 3, 7);
  EXPECT_EQ(i64[0], std::numeric_limits<int64_t>::min() / 7);
  EXPECT_EQ(i64[1], -1285714285714285714);
  EXPECT_EQ(i64[2], 0);
  int32_t i32[] = {-5};
  algo::divide(DataType::kInt32, i32, 1, 1);
  EXPECT_EQ(i32[0], -5);
}

TEST(Divide, FloatingTypes) {
  float f[] = {7, -1, 1};
  algo::divide(DataType::kFloat32, f, 3, 2);
  EXPECT_EQ(f[0], 3.5f);
  EXPECT_EQ(f[1], -0.5f);
  EXPECT_EQ(f[2], 0.5f);
  float third = 1;
  algo::divide(DataType::kFloat32, &third, 1, 3);
  EXPECT_EQ(third, 1.0f / 3.0f);
  double d = 1;
  algo::divide(DataType::kFloat64, &d, 1, 3);
  EXPECT_EQ(d, 1.0 / 3.0);
  uint16_t h[] = {floatToHalf(7), floatToHalf(1), floatToHalf(-1)};
  algo::divide(DataType::kFloat16, h, 3, 3);
  EXPECT_EQ(h[0], floatToHalf(7.0f / 3.0f));
  EXPECT_EQ(h[1], 0x3555);
  EXPECT_EQ(h[2], 0xb555);
  uint16_t b[] = {floatToBfloat16(1), floatToBfloat16(-6)};
  algo::divide(DataType::kBFloat16, b, 2, 3);
  EXPECT_EQ(b[0], 0x3eab);
  EXPECT_EQ(bfloat16ToFloat(b[1]), -2.0f);
}

TEST(Divide, RejectsBool) {
  uint8_t data[2] = {1, 0};
  EXPECT_TRUE(throwsError(
      ErrorKind::kInvalidArgument, [&] { algo::divide(DataType::kBool, data, 2, 2); }, "bool"));
}

}  // namespace
}  // namespace xccl
