// The reductions of collectives.h over real loopback TCP, ranks as threads: exact results for
// world sizes 1-5, element counts 0, 1, odd and > 1M, each algorithm forced and kAuto, every
// root, the dtypes and ops the backend passes; identical float bytes on every rank. Data
// movement: test_data_movement.cc.
#include <cmath>
#include <random>

#include "tcp_collectives.h"

namespace xccl {
namespace {

using algo::Algorithm;
using testing::Calls;
using testing::Collectives;
using testing::contributions;
using testing::describe;
using testing::kLarge;
using testing::kOdd;
using testing::kSmallCounts;
using testing::matches;
using testing::reduced;
using testing::runRanks;
using testing::TypedBuffer;

using Case = testing::ReduceCase;

// reduced() for elements [0, count): computed once, before the ranks start, for large cases.
std::vector<double> reducedAll(const Case& c, int world, size_t count) {
  std::vector<double> expected(count);
  for (size_t i = 0; i < count; ++i) expected[i] = reduced(c, world, i);
  return expected;
}

const Case kAllReduceCases[] = {
    {DataType::kFloat32, ReduceOp::kSum},      {DataType::kFloat32, ReduceOp::kAvg},
    {DataType::kFloat32, ReduceOp::kProduct},  {DataType::kFloat32, ReduceOp::kMin},
    {DataType::kFloat32, ReduceOp::kMax},      {DataType::kFloat64, ReduceOp::kSum},
    {DataType::kFloat64, ReduceOp::kMin},      {DataType::kFloat16, ReduceOp::kSum},
    {DataType::kFloat16, ReduceOp::kAvg},      {DataType::kFloat16, ReduceOp::kMin},
    {DataType::kFloat16, ReduceOp::kProduct},  {DataType::kBFloat16, ReduceOp::kSum},
    {DataType::kBFloat16, ReduceOp::kAvg},     {DataType::kBFloat16, ReduceOp::kMax},
    {DataType::kBFloat16, ReduceOp::kProduct}, {DataType::kInt8, ReduceOp::kSum},
    {DataType::kInt8, ReduceOp::kAvg},         {DataType::kInt8, ReduceOp::kProduct},
    {DataType::kInt8, ReduceOp::kMin},         {DataType::kInt8, ReduceOp::kBxor},
    {DataType::kUInt8, ReduceOp::kSum},        {DataType::kUInt8, ReduceOp::kAvg},
    {DataType::kUInt8, ReduceOp::kBand},       {DataType::kInt16, ReduceOp::kBor},
    {DataType::kInt32, ReduceOp::kSum},        {DataType::kInt32, ReduceOp::kBxor},
    {DataType::kInt64, ReduceOp::kSum},        {DataType::kInt64, ReduceOp::kAvg},
    {DataType::kInt64, ReduceOp::kProduct},    {DataType::kInt64, ReduceOp::kMin},
    {DataType::kInt64, ReduceOp::kMax},        {DataType::kInt64, ReduceOp::kBxor},
    {DataType::kInt64, ReduceOp::kBand},       {DataType::kBool, ReduceOp::kSum},
    {DataType::kBool, ReduceOp::kProduct},     {DataType::kBool, ReduceOp::kMin},
    {DataType::kBool, ReduceOp::kMax},         {DataType::kBool, ReduceOp::kBxor},
};
const Case kReduceScatterCases[] = {
    {DataType::kFloat32, ReduceOp::kSum},  {DataType::kFloat32, ReduceOp::kAvg},
    {DataType::kFloat32, ReduceOp::kMax},  {DataType::kFloat16, ReduceOp::kSum},
    {DataType::kBFloat16, ReduceOp::kMin}, {DataType::kBFloat16, ReduceOp::kAvg},
    {DataType::kInt64, ReduceOp::kSum},    {DataType::kInt64, ReduceOp::kBxor},
    {DataType::kInt8, ReduceOp::kProduct}, {DataType::kUInt8, ReduceOp::kAvg},
    {DataType::kBool, ReduceOp::kMax},     {DataType::kBool, ReduceOp::kProduct},
};
const Case kReduceCases[] = {
    {DataType::kFloat32, ReduceOp::kSum},   {DataType::kFloat32, ReduceOp::kAvg},
    {DataType::kInt64, ReduceOp::kProduct}, {DataType::kBFloat16, ReduceOp::kMax},
    {DataType::kFloat16, ReduceOp::kAvg},   {DataType::kBool, ReduceOp::kBxor},
    {DataType::kInt8, ReduceOp::kMin},      {DataType::kInt32, ReduceOp::kAvg},
};
// > 1M elements: only a few combinations, they dominate the run time.
const Case kLargeCases[] = {{DataType::kFloat32, ReduceOp::kSum},
                            {DataType::kBFloat16, ReduceOp::kAvg}};

TEST_P(Collectives, AllReduce) {
  std::vector<std::vector<double>> large;
  for (const Case& c : kLargeCases) {
    large.push_back(withLarge() ? reducedAll(c, world(), kLarge) : std::vector<double>());
  }
  runRanks(world(), [&](int rank, net::Transport& transport) {
    Calls calls(transport, algorithm());
    for (const Case& c : kAllReduceCases) {
      for (size_t count : kSmallCounts) {
        TypedBuffer data = contributions(c, world(), rank, count);
        algo::allReduce(calls.next("allreduce"), data.data(), count, c.type, c.op);
        EXPECT_TRUE(matches(data, [&](size_t i) { return reduced(c, world(), i); }))
            << describe(c, count, rank);
      }
    }
    for (size_t k = 0; withLarge() && k < large.size(); ++k) {
      const Case& c = kLargeCases[k];
      TypedBuffer data = contributions(c, world(), rank, kLarge);
      algo::allReduce(calls.next("allreduce"), data.data(), kLarge, c.type, c.op);
      EXPECT_TRUE(matches(data, [&](size_t i) { return large[k][i]; }))
          << describe(c, kLarge, rank);
    }
  });
}

TEST_P(Collectives, ReduceScatter) {
  const std::vector<double> large =
      withLarge() ? reducedAll(kLargeCases[0], world(), kLarge * world()) : std::vector<double>();
  runRanks(world(), [&](int rank, net::Transport& transport) {
    Calls calls(transport, algorithm());
    auto run = [&](const Case& c, size_t count, auto expected) {
      // Rank r's input is block-major: element b * count + i belongs to rank b's result.
      TypedBuffer input = contributions(c, world(), rank, count * world());
      TypedBuffer output(c.type, count);
      algo::reduceScatter(calls.next("reduce_scatter"), input.data(), output.data(), count, c.type,
                          c.op);
      EXPECT_TRUE(matches(output, [&](size_t i) { return expected(rank * count + i); }))
          << describe(c, count, rank);
    };
    for (const Case& c : kReduceScatterCases) {
      for (size_t count : kSmallCounts) {
        run(c, count, [&](size_t i) { return reduced(c, world(), i); });
      }
    }
    if (withLarge()) run(kLargeCases[0], kLarge, [&](size_t i) { return large[i]; });
  });
}

TEST_P(Collectives, ReduceToEveryRoot) {
  runRanks(world(), [&](int rank, net::Transport& transport) {
    Calls calls(transport, algorithm());
    auto run = [&](const Case& c, size_t count, int root) {
      TypedBuffer data = contributions(c, world(), rank, count);
      algo::reduce(calls.next("reduce"), data.data(), count, c.type, c.op, root);
      if (rank == root) {
        EXPECT_TRUE(matches(data, [&](size_t i) { return reduced(c, world(), i); }))
            << describe(c, count, rank) << " root " << root;
      }
    };
    for (const Case& c : kReduceCases) {
      for (size_t count : kSmallCounts) {
        for (int root = 0; root < world(); ++root) run(c, count, root);
      }
    }
    if (withLarge()) run(kLargeCases[0], kLarge, world() - 1);
  });
}

// Also runs the Collectives tests of test_data_movement.cc.
INSTANTIATE_TEST_SUITE_P(Worlds, Collectives,
                         ::testing::ValuesIn(testing::allParams({1, 2, 3, 4, 5})),
                         testing::paramName);

// ---------------------------------------------------------------------------------------------
// Random floats: results are not exact, but every rank must hold the same bytes.

class FloatConsistency : public Collectives {};

// Inputs spanning many binades, so that the combination order changes the rounding.
TypedBuffer randomFloats(DataType type, int rank, size_t count, uint64_t salt) {
  std::mt19937_64 random(salt * 1000 + rank);
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(elementSize(type) == 2 ? -4 : -20, 6);
  TypedBuffer buffer(type, count);
  for (size_t i = 0; i < count; ++i) buffer.set(i, std::ldexp(mantissa(random), exponent(random)));
  return buffer;
}

double unitRoundoff(DataType type) {
  switch (type) {
    case DataType::kFloat64: return std::ldexp(1.0, -53);
    case DataType::kFloat16: return std::ldexp(1.0, -11);
    case DataType::kBFloat16: return std::ldexp(1.0, -8);
    default: return std::ldexp(1.0, -24);
  }
}

TEST_P(FloatConsistency, AllReduceGivesIdenticalBytesOnEveryRank) {
  struct FloatCase {
    DataType type;
    ReduceOp op;
    size_t count;
  };
  const std::vector<FloatCase> cases = {
      {DataType::kFloat32, ReduceOp::kSum, 7},      {DataType::kFloat32, ReduceOp::kSum, kOdd},
      {DataType::kFloat32, ReduceOp::kAvg, 200003}, {DataType::kFloat64, ReduceOp::kSum, kOdd},
      {DataType::kFloat16, ReduceOp::kSum, kOdd},   {DataType::kBFloat16, ReduceOp::kSum, kOdd},
      {DataType::kBFloat16, ReduceOp::kAvg, 7},
  };
  // Inputs of every rank and the exact sums, computed once before the ranks start.
  std::vector<std::vector<TypedBuffer>> inputs(cases.size());
  std::vector<std::vector<double>> exact(cases.size()), magnitude(cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    const FloatCase& c = cases[k];
    for (int r = 0; r < world(); ++r) inputs[k].push_back(randomFloats(c.type, r, c.count, k));
    exact[k].assign(c.count, 0);
    magnitude[k].assign(c.count, 0);
    for (size_t i = 0; i < c.count; ++i) {
      for (const TypedBuffer& in : inputs[k]) {
        exact[k][i] += in.get(i);
        magnitude[k][i] += std::fabs(in.get(i));
      }
      if (c.op == ReduceOp::kAvg) exact[k][i] /= world(), magnitude[k][i] /= world();
    }
  }
  std::vector<std::vector<std::vector<uint8_t>>> results(cases.size(),
                                                         std::vector<std::vector<uint8_t>>(
                                                             world()));
  runRanks(world(), [&](int rank, net::Transport& transport) {
    Calls calls(transport, algorithm());
    for (size_t k = 0; k < cases.size(); ++k) {
      const FloatCase& c = cases[k];
      TypedBuffer data = inputs[k][rank];
      algo::allReduce(calls.next("allreduce"), data.data(), c.count, c.type, c.op);
      results[k][rank] = data.bytes();

      // Close to the exact sum: at most one rounding per combination and one for AVG.
      const double bound = (world() + 1) * unitRoundoff(c.type);
      size_t far = 0;
      for (size_t i = 0; i < c.count; ++i) {
        far += std::fabs(data.get(i) - exact[k][i]) > bound * magnitude[k][i];
      }
      EXPECT_EQ(far, 0u) << describe({c.type, c.op}, c.count, rank);

      // The direct algorithm combines the contributions in rank order 0..n-1 on every rank.
      if (algorithm() == Algorithm::kDirect && c.op == ReduceOp::kSum) {
        TypedBuffer fold = inputs[k][0];
        for (int r = 1; r < world(); ++r) {
          algo::reduceInto(c.type, c.op, fold.data(), inputs[k][r].data(), c.count);
        }
        EXPECT_EQ(data.bytes(), fold.bytes()) << describe({c.type, c.op}, c.count, rank);
      }
    }
  });
  for (size_t k = 0; k < cases.size(); ++k) {
    for (int r = 1; r < world(); ++r) {
      EXPECT_EQ(results[k][r], results[k][0])
          << "case " << k << ": rank " << r << " holds other bytes than rank 0";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, FloatConsistency,
                         ::testing::ValuesIn(testing::allParams({2, 3, 4, 5})), testing::paramName);
}  // namespace
}  // namespace xccl
