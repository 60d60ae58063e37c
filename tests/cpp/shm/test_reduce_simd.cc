// The vector reductions (reduce_avx2.cc, reduce_avx512.cc) against the portable loops: bitwise
// equal for every length (vector bodies and scalar tails), op and float type, on random values
// that include subnormals, infinities, overflow and NaNs; reduceMany's fp32 accumulation and
// aliasing. Instruction sets the CPU lacks are skipped (and listed in the test output).
#include <cmath>
#include <cstring>
#include <random>

#include "algo/reduce.h"
#include "algo_testing.h"

namespace xccl {
namespace {

using algo::Isa;

constexpr size_t kLengths[] = {0,  1,  2,  3,  7,  8,  9,   15,  16,   17,
                               31, 32, 33, 63, 64, 65, 127, 129, 1000, 4099};
constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                    DataType::kBFloat16};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax};

std::vector<Isa> vectorIsas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (algo::isaAvailable(isa)) isas.push_back(isa);
  }
  return isas;
}

// Random bit patterns for 16-bit floats (every finite value, subnormals, infinities); for
// fp32/fp64 values over a wide exponent range plus subnormals, zeros of both signs and
// infinities. With `nanEvery` > 0, every nanEvery-th element of source `which` is a NaN (in one
// source only: with NaNs on both sides IEEE leaves the payload choice to the implementation).
std::vector<uint8_t> randomValues(DataType type, size_t count, uint64_t seed, int which = 0,
                                  size_t nanEvery = 0) {
  std::mt19937_64 random(seed);
  const size_t elem = elementSize(type);
  std::vector<uint8_t> bytes(count * elem);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* p = bytes.data() + i * elem;
    const uint64_t r = random();
    const bool nan = nanEvery > 0 && i % nanEvery == static_cast<size_t>(which);
    if (elem == 2) {
      uint16_t h = static_cast<uint16_t>(r);
      const bool isNan = type == DataType::kFloat16 ? ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
                                                    : ((h & 0x7f80) == 0x7f80 && (h & 0x7f));
      if (isNan) h &= type == DataType::kFloat16 ? 0xfc00 : 0xff80;  // that NaN becomes an infinity
      if (nan) h = type == DataType::kFloat16 ? 0x7e01 : 0xffc1;
      std::memcpy(p, &h, 2);
      continue;
    }
    double v = std::ldexp(static_cast<double>(r >> 11) / 9007199254740992.0 - 0.5,
                          static_cast<int>(r % 80) - 40);
    if (r % 97 == 0) v = (r & 2) ? INFINITY : -INFINITY;
    if (r % 89 == 0) v = (r & 2) ? 0.0 : -0.0;
    if (r % 83 == 0) v = std::ldexp(1.0, elem == 4 ? -140 : -1060);  // subnormal
    if (nan) v = (r & 2) ? std::nan("5") : -std::nan("7");
    if (elem == 4) {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
    } else {
      std::memcpy(p, &v, 8);
    }
  }
  return bytes;
}

std::string label(Isa isa, DataType type, ReduceOp op, size_t count) {
  return std::string(algo::isaName(isa)) + " " + dataTypeName(type) + " " + reduceOpName(op) +
         " count " + std::to_string(count);
}

TEST(ReduceSimd, ReportsWhichInstructionSetsThisCpuHas) {
  EXPECT_TRUE(algo::isaAvailable(Isa::kScalar));
  EXPECT_TRUE(algo::isaAvailable(algo::bestIsa()));
  if (algo::isaAvailable(Isa::kAvx512)) {
    EXPECT_TRUE(algo::isaAvailable(Isa::kAvx2));
  }
  std::cout << "[          ] best reduction ISA here: " << algo::isaName(algo::bestIsa()) << "\n";
  if (!algo::isaAvailable(Isa::kAvx512)) {
    uint16_t a = 1, b = 2;
    EXPECT_TRUE(testing::throwsError(
        ErrorKind::kInvalidArgument,
        [&] { algo::reduceInto(Isa::kAvx512, DataType::kFloat16, ReduceOp::kSum, &a, &b, 1); },
        "avx512"));
  }
}

TEST(ReduceSimd, ReduceIntoMatchesScalarBitwise) {
  if (vectorIsas().empty()) GTEST_SKIP() << "no vector instruction set on this CPU";
  for (Isa isa : vectorIsas()) {
    for (DataType type : kFloatTypes) {
      for (ReduceOp op : kOps) {
        for (size_t count : kLengths) {
          for (int nanSide : {-1, 0, 1}) {
            const size_t nanEvery = nanSide < 0 ? 0 : 5;
            const std::vector<uint8_t> src =
                randomValues(type, count, count * 31 + 2, nanSide == 1 ? 0 : 9, nanEvery);
            std::vector<uint8_t> want =
                randomValues(type, count, count * 31 + 1, nanSide == 0 ? 0 : 9, nanEvery);
            std::vector<uint8_t> got = want;
            algo::reduceInto(Isa::kScalar, type, op, want.data(), src.data(), count);
            algo::reduceInto(isa, type, op, got.data(), src.data(), count);
            ASSERT_TRUE(got == want)
                << label(isa, type, op, count) << " NaNs in source " << nanSide;
          }
        }
      }
    }
  }
}

TEST(ReduceSimd, ReduceManyMatchesScalarBitwise) {
  if (vectorIsas().empty()) GTEST_SKIP() << "no vector instruction set on this CPU";
  for (Isa isa : vectorIsas()) {
    for (DataType type : kFloatTypes) {
      for (ReduceOp op : kOps) {
        for (size_t count : kLengths) {
          for (int n : {1, 2, 3, 5}) {
            std::vector<std::vector<uint8_t>> inputs;
            std::vector<const void*> srcs;
            for (int k = 0; k < n; ++k) {
              inputs.push_back(randomValues(type, count, count * 131 + k, k == 1 ? 0 : 9, 7));
            }
            for (const auto& in : inputs) srcs.push_back(in.data());
            std::vector<uint8_t> want(count * elementSize(type)), got(want.size(), 0xab);
            algo::reduceMany(Isa::kScalar, type, op, want.data(), srcs.data(), n, count);
            algo::reduceMany(isa, type, op, got.data(), srcs.data(), n, count);
            ASSERT_TRUE(got == want) << label(isa, type, op, count) << " from " << n << " sources";
          }
        }
      }
    }
  }
}

// Types and ops without vector kernels still give the portable results through every ISA.
TEST(ReduceSimd, OtherTypesFallBackToThePortableLoops) {
  for (Isa isa : vectorIsas()) {
    for (DataType type : {DataType::kInt8, DataType::kInt32, DataType::kInt64, DataType::kBool}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kBxor}) {
        const size_t count = 1001;
        std::vector<uint8_t> a(count * elementSize(type)), b(a.size());
        std::mt19937 random(7);
        for (auto& x : a) x = type == DataType::kBool ? random() % 2 : random();
        for (auto& x : b) x = type == DataType::kBool ? random() % 2 : random();
        std::vector<uint8_t> want = a, got = a;
        algo::reduceInto(Isa::kScalar, type, op, want.data(), b.data(), count);
        algo::reduceInto(isa, type, op, got.data(), b.data(), count);
        EXPECT_TRUE(got == want) << label(isa, type, op, count);
        const void* srcs[] = {a.data(), b.data(), a.data()};
        std::vector<uint8_t> manyWant(a.size()), manyGot(a.size());
        algo::reduceMany(Isa::kScalar, type, op, manyWant.data(), srcs, 3, count);
        algo::reduceMany(isa, type, op, manyGot.data(), srcs, 3, count);
        EXPECT_TRUE(manyGot == manyWant) << label(isa, type, op, count) << " many";
      }
    }
  }
}

// reduceMany accumulates 16-bit floats in fp32 and rounds once: 1 + 2^-8 + 2^-8 is exactly
// 1 + 2^-7 in bf16, where a chain of reduceInto calls rounds 1 + 2^-8 back to 1 (tie to even)
// twice. For fp32 the two are the same left fold and agree bitwise.
TEST(ReduceMany, AccumulatesSixteenBitFloatsInFloat32) {
  for (Isa isa : {Isa::kScalar, algo::bestIsa()}) {
    const size_t count = 37;  // a vector body and a tail
    std::vector<uint16_t> one(count, algo::floatToBfloat16(1.0f));
    std::vector<uint16_t> tiny(count, algo::floatToBfloat16(std::ldexp(1.0f, -8)));
    const void* srcs[] = {one.data(), tiny.data(), tiny.data()};
    std::vector<uint16_t> many(count), chain = one;
    algo::reduceMany(isa, DataType::kBFloat16, ReduceOp::kSum, many.data(), srcs, 3, count);
    algo::reduceInto(isa, DataType::kBFloat16, ReduceOp::kSum, chain.data(), tiny.data(), count);
    algo::reduceInto(isa, DataType::kBFloat16, ReduceOp::kSum, chain.data(), tiny.data(), count);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(algo::bfloat16ToFloat(many[i]), 1.0078125f)
          << algo::isaName(isa) << " element " << i;
      ASSERT_EQ(algo::bfloat16ToFloat(chain[i]), 1.0f) << algo::isaName(isa) << " element " << i;
    }
    std::vector<uint8_t> a = randomValues(DataType::kFloat32, 1000, 1),
                         b = randomValues(DataType::kFloat32, 1000, 2),
                         c = randomValues(DataType::kFloat32, 1000, 3);
    const void* fsrcs[] = {a.data(), b.data(), c.data()};
    std::vector<uint8_t> fmany(a.size()), fchain = a;
    algo::reduceMany(isa, DataType::kFloat32, ReduceOp::kSum, fmany.data(), fsrcs, 3, 1000);
    algo::reduceInto(isa, DataType::kFloat32, ReduceOp::kSum, fchain.data(), b.data(), 1000);
    algo::reduceInto(isa, DataType::kFloat32, ReduceOp::kSum, fchain.data(), c.data(), 1000);
    EXPECT_TRUE(fmany == fchain) << algo::isaName(isa);
  }
}

TEST(ReduceMany, DestinationMayBeASource) {
  for (Isa isa : {Isa::kScalar, algo::bestIsa()}) {
    for (DataType type : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64}) {
      const size_t count = 2053;
      std::vector<std::vector<uint8_t>> in;
      // int64 inputs: random float64 bit patterns.
      const DataType bits = type == DataType::kInt64 ? DataType::kFloat64 : type;
      for (int k = 0; k < 3; ++k) in.push_back(randomValues(bits, count, 40 + k));
      const void* srcs[] = {in[0].data(), in[1].data(), in[2].data()};
      std::vector<uint8_t> want(in[0].size());
      algo::reduceMany(isa, type, ReduceOp::kMax, want.data(), srcs, 3, count);
      for (int alias : {0, 2}) {
        std::vector<std::vector<uint8_t>> copy = in;
        const void* asrcs[] = {copy[0].data(), copy[1].data(), copy[2].data()};
        algo::reduceMany(isa, type, ReduceOp::kMax, copy[alias].data(), asrcs, 3, count);
        EXPECT_TRUE(copy[alias] == want)
            << algo::isaName(isa) << " " << dataTypeName(type) << " into source " << alias;
      }
    }
  }
}

}  // namespace
}  // namespace xccl
