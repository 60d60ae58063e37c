// The compressed all_reduce of xccl.hooks (algo/compressed_allreduce.h): its conversions against
// reduce.h's, the in-place compaction, and the TCP algorithm over real loopback TCP (ranks as
// threads) with exact expected values, fp32 accumulation and identical bytes on every rank. The
// shared-memory and hierarchical paths run in tests/python/test_hooks.py.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "algo/compressed_allreduce.h"
#include "algo/compressed_codec.h"
#include "algo/reduce.h"
#include "harness.h"

namespace xccl {
namespace {

using algo::compressed::BFloat16Wire;
using algo::compressed::Float16Wire;

float floatOfBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

TEST(CompressedCodec, Bfloat16MatchesReduceConversions) {
  // Every 65521st bit pattern plus the edges: NaNs, infinities, subnormals, ties.
  std::vector<uint32_t> patterns = {0,           0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00001u,
                                    0x00000001u, 0x00018000u, 0x3f808000u, 0x3f818000u};
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 65521) patterns.push_back(bits);
  for (uint32_t bits : patterns) {
    const float f = floatOfBits(bits);
    ASSERT_EQ(BFloat16Wire::narrow(f), algo::floatToBfloat16(f)) << std::hex << bits;
    const uint16_t b = static_cast<uint16_t>(bits >> 16);
    const float a = BFloat16Wire::widen(b), e = algo::bfloat16ToFloat(b);
    ASSERT_EQ(std::memcmp(&a, &e, sizeof a), 0) << std::hex << b;
  }
}

template <typename S, typename W>
void checkCompactExpand(size_t count) {
  std::mt19937 rng(static_cast<unsigned>(count));
  std::normal_distribution<float> normal(0.0f, 100.0f);
  std::vector<S> data(count), expected(count);
  for (size_t i = 0; i < count; ++i) {
    data[i] = static_cast<S>(normal(rng));
    expected[i] = static_cast<S>(W::widen(W::narrow(static_cast<float>(data[i]))));
  }
  algo::compressed::compact<W, S>(data.data(), count);
  algo::compressed::expand<W, S>(data.data(), count);
  EXPECT_EQ(data, expected) << "count " << count;
}

TEST(CompressedCodec, CompactThenExpandIsRoundingToTheWire) {
  for (size_t count :
       {size_t{0}, size_t{1}, size_t{2047}, size_t{2048}, size_t{2049}, size_t{10007}}) {
    checkCompactExpand<float, BFloat16Wire>(count);
    checkCompactExpand<float, Float16Wire>(count);
    checkCompactExpand<double, BFloat16Wire>(count);
  }
}

algo::Context contextFor(net::Transport& transport, uint64_t seq) {
  algo::Tunables tunables;
  tunables.ringChunkBytes = 4096;  // many chunks per peer even for modest sizes
  return {transport, seq, "compressed #" + std::to_string(seq),
          net::Clock::now() + std::chrono::seconds(60), tunables};
}

class CompressedTcp : public ::testing::TestWithParam<int> {};

TEST_P(CompressedTcp, ExactAveragesInPlace) {
  const int world = GetParam();
  testing::runRanks(world, [&](int rank, net::Transport& transport) {
    uint64_t seq = 0;
    for (DataType wire : {DataType::kBFloat16, DataType::kFloat16}) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}, size_t{100003}}) {
        // Small integers: exact in the wire type, so the average is exact too.
        std::vector<float> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(i % 64 + rank);
        algo::compressedAllReduce(contextFor(transport, ++seq), data.data(), count,
                                  DataType::kFloat32, wire, world);
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(data[i], static_cast<float>(i % 64) + (world - 1) / 2.0f)
              << "element " << i << " of " << count;
        }
      }
      // 256 + 1 + 1 (+ 1): bf16 accumulation rounds each + 1 away; fp32 keeps them.
      std::vector<double> one(3, rank == 0 ? 256.0 : 1.0);
      algo::compressedAllReduce(contextFor(transport, ++seq), one.data(), one.size(),
                                DataType::kFloat64, wire, world);
      const float exact = (256.0f + static_cast<float>(world - 1)) / static_cast<float>(world);
      const float onWire = wire == DataType::kBFloat16
                               ? BFloat16Wire::widen(BFloat16Wire::narrow(exact))
                               : Float16Wire::widen(Float16Wire::narrow(exact));
      EXPECT_EQ(one[0], world == 1 ? one[0] : static_cast<double>(onWire));
      if (world >= 3) {
        EXPECT_NE(one[0], 256.0 / world);
      }
    }
  });
}

TEST_P(CompressedTcp, EveryRankGetsTheSameBytes) {
  const int world = GetParam();
  std::vector<std::vector<float>> results(world);
  testing::runRanks(world, [&](int rank, net::Transport& transport) {
    std::mt19937 rng(rank + 1);
    std::normal_distribution<float> normal;
    std::vector<float> data(20011);
    for (float& x : data) x = normal(rng);
    algo::compressedAllReduce(contextFor(transport, 1), data.data(), data.size(),
                              DataType::kFloat32, DataType::kBFloat16, world);
    results[rank] = data;
  });
  for (int r = 1; r < world; ++r) EXPECT_EQ(results[r], results[0]) << "rank " << r;
}

TEST(CompressedTcp, RefusesOtherTypes) {
  testing::runRanks(1, [&](int, net::Transport& transport) {
    std::vector<int32_t> ints(4);
    EXPECT_THROW(algo::compressedAllReduce(contextFor(transport, 1), ints.data(), 4,
                                           DataType::kInt32, DataType::kBFloat16, 1),
                 Error);
    std::vector<float> floats(4);
    EXPECT_THROW(algo::compressedAllReduce(contextFor(transport, 2), floats.data(), 4,
                                           DataType::kFloat32, DataType::kFloat32, 1),
                 Error);
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, CompressedTcp, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace xccl
