// The collectives (collectives.h) over real loopback TCP, ranks as threads: exact results for
// world sizes 1-5, element counts 0, 1, odd and > 1M, each algorithm forced and kAuto, every
// root, the dtypes and ops the backend passes; identical float bytes on every rank.
#include <atomic>
#include <cmath>
#include <random>

#include "algo/collectives.h"
#include "algo_testing.h"
#include "harness.h"

namespace xccl {
namespace {

using algo::Algorithm;
using testing::combineExact;
using testing::matches;
using testing::runRanks;
using testing::TypedBuffer;

constexpr size_t kOdd = 4099;       // several 4 KiB ring chunks per segment, uneven segments
constexpr size_t kLarge = 1000003;  // > 1M elements, odd
constexpr size_t kSmallCounts[] = {0, 1, 7, kOdd};

// One rank's communicator: contexts with increasing sequence numbers on one transport, as the
// backend issues them.
class Calls {
 public:
  Calls(net::Transport& transport, Algorithm algorithm) : transport_(transport) {
    tunables_.forced = algorithm;
    tunables_.ringChunkBytes = 4096;  // the ring pipelines many chunks even for modest sizes
  }
  void force(Algorithm algorithm) { tunables_.forced = algorithm; }
  algo::Context next(const std::string& what) {
    ++seq_;
    return {transport_, seq_, what + " #" + std::to_string(seq_),
            net::Clock::now() + std::chrono::seconds(60), tunables_};
  }

 private:
  net::Transport& transport_;
  algo::Tunables tunables_;
  uint64_t seq_ = 0;
};

uint32_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  return static_cast<uint32_t>(x);
}

// ---------------------------------------------------------------------------------------------
// Reductions: small integer inputs, so every result is exact in any combination order.

struct Case {
  DataType type;
  ReduceOp op;
};

std::string describe(const Case& c, size_t count, int rank) {
  return std::string(dataTypeName(c.type)) + " " + reduceOpName(c.op) + " count " +
         std::to_string(count) + " on rank " + std::to_string(rank);
}

// What `rank` contributes at element i to a reduction over `world` ranks.
double contribution(DataType type, ReduceOp op, int world, int rank, size_t i) {
  const uint32_t h = mix(rank, i);
  if (type == DataType::kBool) return (i % 11 != 0 && h % 4 != 0) ? 1 : 0;
  if (op == ReduceOp::kProduct) {  // |product| <= 2^5 for five ranks
    static const double kFactors[] = {-2, -1, 1, 2};
    if (rank == 0 && i % 13 == 0) return 0;
    return type == DataType::kUInt8 ? 1 + h % 2 : kFactors[h % 4];
  }
  if (op == ReduceOp::kAvg && isFloating(type)) {
    // A per-element base plus per-rank offsets summing to zero: the average is exactly the base.
    const double base = static_cast<int>(mix(~0ull, i) % 17) - 8;
    return base + (rank < world - 1 ? rank : -(world - 1) * (world - 2) / 2);
  }
  if (type == DataType::kUInt8) return h % 17;
  return static_cast<int>(h % 17) - 8;
}

double reduced(DataType type, ReduceOp op, int world, size_t i) {
  double acc = contribution(type, op, world, 0, i);
  for (int r = 1; r < world; ++r) {
    acc = combineExact(type, algo::combinerOf(op), acc, contribution(type, op, world, r, i));
  }
  if (op == ReduceOp::kAvg) {  // integers truncate toward zero
    acc = isFloating(type) ? acc / world : static_cast<double>(static_cast<int64_t>(acc) / world);
  }
  return acc;
}

// reduced() for elements [0, count): computed once, before the ranks start, for large cases.
std::vector<double> reducedAll(const Case& c, int world, size_t count) {
  std::vector<double> expected(count);
  for (size_t i = 0; i < count; ++i) expected[i] = reduced(c.type, c.op, world, i);
  return expected;
}

TypedBuffer contributions(const Case& c, int world, int rank, size_t count) {
  TypedBuffer buffer(c.type, count);
  for (size_t i = 0; i < count; ++i) buffer.set(i, contribution(c.type, c.op, world, rank, i));
  return buffer;
}

const Case kAllReduceCases[] = {
    {DataType::kFloat32, ReduceOp::kSum},   {DataType::kFloat32, ReduceOp::kAvg},
    {DataType::kFloat32, ReduceOp::kProduct}, {DataType::kFloat32, ReduceOp::kMin},
    {DataType::kFloat32, ReduceOp::kMax},   {DataType::kFloat64, ReduceOp::kSum},
    {DataType::kFloat64, ReduceOp::kMin},   {DataType::kFloat16, ReduceOp::kSum},
    {DataType::kFloat16, ReduceOp::kAvg},   {DataType::kFloat16, ReduceOp::kMin},
    {DataType::kFloat16, ReduceOp::kProduct}, {DataType::kBFloat16, ReduceOp::kSum},
    {DataType::kBFloat16, ReduceOp::kAvg},  {DataType::kBFloat16, ReduceOp::kMax},
    {DataType::kBFloat16, ReduceOp::kProduct}, {DataType::kInt8, ReduceOp::kSum},
    {DataType::kInt8, ReduceOp::kAvg},      {DataType::kInt8, ReduceOp::kProduct},
    {DataType::kInt8, ReduceOp::kMin},      {DataType::kInt8, ReduceOp::kBxor},
    {DataType::kUInt8, ReduceOp::kSum},     {DataType::kUInt8, ReduceOp::kAvg},
    {DataType::kUInt8, ReduceOp::kBand},    {DataType::kInt16, ReduceOp::kBor},
    {DataType::kInt32, ReduceOp::kSum},     {DataType::kInt32, ReduceOp::kBxor},
    {DataType::kInt64, ReduceOp::kSum},     {DataType::kInt64, ReduceOp::kAvg},
    {DataType::kInt64, ReduceOp::kProduct}, {DataType::kInt64, ReduceOp::kMin},
    {DataType::kInt64, ReduceOp::kMax},     {DataType::kInt64, ReduceOp::kBxor},
    {DataType::kInt64, ReduceOp::kBand},    {DataType::kBool, ReduceOp::kSum},
    {DataType::kBool, ReduceOp::kProduct},  {DataType::kBool, ReduceOp::kMin},
    {DataType::kBool, ReduceOp::kMax},      {DataType::kBool, ReduceOp::kBxor},
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

// ---------------------------------------------------------------------------------------------
// Data movement: byte patterns that differ per (source, destination) pair and along the data.

uint8_t pattern(int a, int b, size_t j) {
  // (a * 8 + b) * 37 is distinct mod 256 for a, b < 8: parts from different ranks differ.
  return static_cast<uint8_t>(j * 131 + (j >> 9) * 7 + (a * 8 + b) * 37 + 1);
}

::testing::AssertionResult hasPattern(const uint8_t* data, size_t bytes, int a, int b) {
  for (size_t j = 0; j < bytes; ++j) {
    if (data[j] != pattern(a, b, j)) {
      return ::testing::AssertionFailure()
             << "byte " << j << " of " << bytes << " is " << int(data[j]) << ", expected "
             << int(pattern(a, b, j)) << " (part " << a << "/" << b << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<uint8_t> filled(size_t bytes, int a, int b) {
  std::vector<uint8_t> data(bytes);
  for (size_t j = 0; j < bytes; ++j) data[j] = pattern(a, b, j);
  return data;
}

constexpr uint8_t kUntouched = 0xee;

// ---------------------------------------------------------------------------------------------

struct Param {
  int world;
  Algorithm algorithm;
};

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(algo::algorithmName(info.param.algorithm)) + "_world" +
         std::to_string(info.param.world);
}

std::vector<Param> allParams(std::initializer_list<int> worlds) {
  std::vector<Param> params;
  for (int world : worlds) {
    for (Algorithm a : {Algorithm::kDirect, Algorithm::kRing, Algorithm::kAuto}) {
      params.push_back({world, a});
    }
  }
  return params;
}

class Collectives : public ::testing::TestWithParam<Param> {
 protected:
  int world() const { return GetParam().world; }
  Algorithm algorithm() const { return GetParam().algorithm; }
  // > 1M elements with each forced algorithm (kAuto picks one of them for such sizes).
  bool withLarge() const { return world() <= 4 && algorithm() != Algorithm::kAuto; }
};

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
        EXPECT_TRUE(matches(data, [&](size_t i) { return reduced(c.type, c.op, world(), i); }))
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
      algo::reduceScatter(calls.next("reduce_scatter"), input.data(), output.data(), count,
                          c.type, c.op);
      EXPECT_TRUE(matches(output, [&](size_t i) { return expected(rank * count + i); }))
          << describe(c, count, rank);
    };
    for (const Case& c : kReduceScatterCases) {
      for (size_t count : kSmallCounts) {
        run(c, count, [&](size_t i) { return reduced(c.type, c.op, world(), i); });
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
        EXPECT_TRUE(matches(data, [&](size_t i) { return reduced(c.type, c.op, world(), i); }))
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

TEST_P(Collectives, BroadcastFromEveryRoot) {
  runRanks(world(), [&](int rank, net::Transport& transport) {
    Calls calls(transport, algorithm());
    auto run = [&](size_t bytes, int root) {
      std::vector<uint8_t> data =
          rank == root ? filled(bytes, root, 2) : std::vector<uint8_t>(bytes, kUntouched);
      algo::broadcast(calls.next("broadcast"), data.data(), bytes, root);
      EXPECT_TRUE(hasPattern(data.data(), bytes, root, 2))
          << bytes << " bytes from root " << root << " on rank " << rank;
    };
    for (size_t count : kSmallCounts) {
      for (int root = 0; root < world(); ++root) {
        run(count * 4, root);
        run(count * 4 + 1, root);  // odd byte counts: broadcast is untyped
      }
    }
    if (withLarge()) run(kLarge * 4, world() - 1);
  });
}

// Per-rank byte counts for all_gather: equal, uneven with zero-length parts, one rank only.
std::vector<std::vector<size_t>> allGatherLayouts(int world) {
  std::vector<std::vector<size_t>> layouts;
  for (size_t count : kSmallCounts) layouts.emplace_back(world, count * 4);
  std::vector<size_t> uneven, single(world, 0);
  for (int r = 0; r < world; ++r) uneven.push_back(r % 3 == 1 ? 0 : 1 + r * 4099);
  single[world - 1] = 9001;
  layouts.push_back(uneven);
  layouts.push_back(single);
  return layouts;
}

TEST_P(Collectives, AllGather) {
  runRanks(world(), [&](int rank, net::Transport& transport) {
    Calls calls(transport, algorithm());
    auto run = [&](const std::vector<size_t>& bytesPerRank, bool inPlace) {
      size_t total = 0;
      std::vector<size_t> offset(world());
      for (int r = 0; r < world(); ++r) offset[r] = total, total += bytesPerRank[r];
      std::vector<uint8_t> output(total, kUntouched);
      std::vector<uint8_t> input = filled(bytesPerRank[rank], rank, 3);
      const void* in = input.data();
      if (inPlace) {  // input aliases this rank's part of the output
        std::copy(input.begin(), input.end(), output.begin() + offset[rank]);
        in = output.data() + offset[rank];
      }
      algo::allGather(calls.next("allgather"), in, output.data(), bytesPerRank);
      for (int r = 0; r < world(); ++r) {
        EXPECT_TRUE(hasPattern(output.data() + offset[r], bytesPerRank[r], r, 3))
            << "part " << r << " on rank " << rank << (inPlace ? " (in place)" : "");
      }
    };
    for (const auto& layout : allGatherLayouts(world())) {
      run(layout, false);
      run(layout, true);
    }
    if (withLarge()) run(std::vector<size_t>(world(), kLarge * 4), false);
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, Collectives, ::testing::ValuesIn(allParams({1, 2, 3, 4, 5})),
                         paramName);

// ---------------------------------------------------------------------------------------------
// Collectives that do not select an algorithm: parameterised over the world size only.

class DataMovement : public ::testing::TestWithParam<int> {};

// all_to_all lengths (bytes) from `src` to `dst`: a mix of zeros and odd sizes.
size_t allToAllBytes(int src, int dst, int variant) {
  const int m = (src * 3 + dst * 5 + variant) % 4;
  return m == 0 ? 0 : (m * 1031 + src) * (variant == 4 ? 64 : 1);
}

TEST_P(DataMovement, AllToAllUnevenSplits) {
  const int world = GetParam();
  runRanks(world, [&](int rank, net::Transport& transport) {
    Calls calls(transport, Algorithm::kAuto);
    for (int variant = 0; variant < 5; ++variant) {
      // Parts are laid out with gaps, and received parts in reverse rank order, so the offsets
      // must be honoured, not assumed contiguous.
      std::vector<size_t> sendOffsets(world), sendLengths(world), recvOffsets(world),
          recvLengths(world);
      size_t inBytes = 0, outBytes = 0;
      for (int peer = 0; peer < world; ++peer) {
        sendLengths[peer] = allToAllBytes(rank, peer, variant);
        sendOffsets[peer] = inBytes;
        inBytes += sendLengths[peer] + 3;
      }
      for (int peer = world - 1; peer >= 0; --peer) {
        recvLengths[peer] = allToAllBytes(peer, rank, variant);
        recvOffsets[peer] = outBytes;
        outBytes += recvLengths[peer] + 5;
      }
      std::vector<uint8_t> input(inBytes, 0), output(outBytes, kUntouched);
      for (int peer = 0; peer < world; ++peer) {
        std::vector<uint8_t> part = filled(sendLengths[peer], rank, peer);
        std::copy(part.begin(), part.end(), input.begin() + sendOffsets[peer]);
      }
      algo::allToAll(calls.next("alltoall"), input.data(), sendOffsets, sendLengths,
                     output.data(), recvOffsets, recvLengths);
      std::vector<bool> covered(outBytes, false);
      for (int peer = 0; peer < world; ++peer) {
        EXPECT_TRUE(hasPattern(output.data() + recvOffsets[peer], recvLengths[peer], peer, rank))
            << "from rank " << peer << " on rank " << rank << ", variant " << variant;
        std::fill_n(covered.begin() + recvOffsets[peer], recvLengths[peer], true);
      }
      size_t clobbered = 0;
      for (size_t j = 0; j < outBytes; ++j) clobbered += !covered[j] && output[j] != kUntouched;
      EXPECT_EQ(clobbered, 0u) << "bytes written outside the receive parts on rank " << rank;
    }
  });
}

TEST_P(DataMovement, GatherAndScatterAtEveryRoot) {
  const int world = GetParam();
  runRanks(world, [&](int rank, net::Transport& transport) {
    Calls calls(transport, Algorithm::kAuto);
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{5003}}) {
      for (int root = 0; root < world; ++root) {
        // Non-roots pass no output to gather and no input to scatter (c10d has none there).
        std::vector<uint8_t> input = filled(bytes, rank, 0);
        std::vector<uint8_t> gathered(rank == root ? bytes * world : 0, kUntouched);
        algo::gather(calls.next("gather"), input.data(), bytes,
                     rank == root ? gathered.data() : nullptr, root);
        if (rank == root) {
          for (int r = 0; r < world; ++r) {
            EXPECT_TRUE(hasPattern(gathered.data() + r * bytes, bytes, r, 0))
                << "gather part " << r << " at root " << root;
          }
        }
        std::vector<uint8_t> blocks;
        for (int r = 0; rank == root && r < world; ++r) {
          std::vector<uint8_t> part = filled(bytes, r, 1);
          blocks.insert(blocks.end(), part.begin(), part.end());
        }
        std::vector<uint8_t> mine(bytes, kUntouched);
        algo::scatter(calls.next("scatter"), rank == root ? blocks.data() : nullptr,
                      mine.data(), bytes, root);
        EXPECT_TRUE(hasPattern(mine.data(), bytes, rank, 1))
            << "scatter from root " << root << " on rank " << rank;
      }
    }
  });
}

TEST_P(DataMovement, BarrierWaitsForEveryRank) {
  const int world = GetParam();
  std::atomic<int> arrived{0};
  runRanks(world, [&](int rank, net::Transport& transport) {
    Calls calls(transport, Algorithm::kAuto);
    for (int round = 1; round <= 5; ++round) {
      arrived.fetch_add(1);
      algo::barrier(calls.next("barrier"));
      // Nobody leaves barrier `round` before every rank has entered it.
      EXPECT_GE(arrived.load(), world * round) << "rank " << rank << " round " << round;
    }
  });
  EXPECT_EQ(arrived.load(), world * 5);
}

INSTANTIATE_TEST_SUITE_P(Worlds, DataMovement, ::testing::Values(1, 2, 3, 4, 5));

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
  std::vector<std::vector<std::vector<uint8_t>>> results(
      cases.size(), std::vector<std::vector<uint8_t>>(world()));
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

INSTANTIATE_TEST_SUITE_P(Worlds, FloatConsistency, ::testing::ValuesIn(allParams({2, 3, 4, 5})),
                         paramName);

// ---------------------------------------------------------------------------------------------

// Many collectives back to back on one transport, mixing algorithms and sizes, with inputs that
// change every iteration: a message matched to the wrong collective would show up as a wrong
// value (the tags differ only by sequence number).
TEST(CollectiveSequence, BackToBackCollectivesKeepTheirMessagesApart) {
  constexpr int kWorld = 4;
  runRanks(kWorld, [&](int rank, net::Transport& transport) {
    Calls calls(transport, Algorithm::kAuto);
    for (int iter = 0; iter < 30; ++iter) {
      calls.force(iter % 2 ? Algorithm::kRing : Algorithm::kDirect);
      std::vector<int64_t> values(7);
      for (size_t i = 0; i < values.size(); ++i) values[i] = iter * 1000 + rank * 10 + i;
      algo::allReduce(calls.next("allreduce"), values.data(), values.size(), DataType::kInt64,
                      ReduceOp::kSum);
      for (size_t i = 0; i < values.size(); ++i) {
        EXPECT_EQ(values[i], kWorld * (iter * 1000 + int64_t(i)) + 10 * (0 + 1 + 2 + 3))
            << "iteration " << iter << " element " << i;
      }
      const int root = iter % kWorld;
      std::vector<uint8_t> data = rank == root ? filled(64, root, iter % 8)
                                               : std::vector<uint8_t>(64, kUntouched);
      algo::broadcast(calls.next("broadcast"), data.data(), data.size(), root);
      EXPECT_TRUE(hasPattern(data.data(), data.size(), root, iter % 8)) << "iteration " << iter;

      std::vector<float> block(kOdd, float(iter + rank));
      std::vector<float> gathered(kOdd * kWorld);
      algo::allGather(calls.next("allgather"), block.data(), gathered.data(),
                      std::vector<size_t>(kWorld, kOdd * sizeof(float)));
      for (int r = 0; r < kWorld; ++r) {
        EXPECT_EQ(gathered[r * kOdd], float(iter + r)) << "iteration " << iter;
        EXPECT_EQ(gathered[r * kOdd + kOdd - 1], float(iter + r)) << "iteration " << iter;
      }
      algo::barrier(calls.next("barrier"));
    }
  });
}

}  // namespace
}  // namespace xccl
