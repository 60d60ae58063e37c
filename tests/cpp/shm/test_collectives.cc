// The shm collectives (algo/shm_collectives.h), ranks as threads sharing one segment with
// 4 KiB slots, so that a few thousand elements already take several pipelined chunks: exact
// results for world sizes 1-5, counts 0, 1, odd and many slots, one-shot and two-shot; random
// floats give the same bytes on every rank, equal to a rank-order reduceMany.
#include <random>

#include "algo/reduce.h"
#include "collective_cases.h"
#include "shm_testing.h"

namespace xccl {
namespace {

using testing::matches;
using testing::ShmCalls;
using testing::TypedBuffer;

constexpr size_t kSlot = 4096;
constexpr size_t kCounts[] = {0, 1, 7, 4099};  // 4099 fp32: 5 chunks of a 4 KiB slot
constexpr size_t kLarge = 100003;               // ~100 slots of fp32

enum class Mode { kOneShot, kTwoShot };

algo::Tunables tunablesFor(Mode mode) {
  algo::Tunables t;
  t.shmTwoShotMinBytes = mode == Mode::kTwoShot ? 0 : SIZE_MAX;
  return t;
}

using Case = testing::ReduceCase;
using testing::describe;
using testing::reduced;

const Case kAllReduceCases[] = {
    {DataType::kFloat32, ReduceOp::kSum},     {DataType::kFloat32, ReduceOp::kAvg},
    {DataType::kFloat32, ReduceOp::kProduct}, {DataType::kFloat32, ReduceOp::kMin},
    {DataType::kFloat32, ReduceOp::kMax},     {DataType::kFloat64, ReduceOp::kSum},
    {DataType::kFloat64, ReduceOp::kMax},     {DataType::kFloat16, ReduceOp::kSum},
    {DataType::kFloat16, ReduceOp::kAvg},     {DataType::kFloat16, ReduceOp::kMin},
    {DataType::kBFloat16, ReduceOp::kSum},    {DataType::kBFloat16, ReduceOp::kAvg},
    {DataType::kBFloat16, ReduceOp::kMax},    {DataType::kBFloat16, ReduceOp::kProduct},
    {DataType::kInt8, ReduceOp::kSum},        {DataType::kInt8, ReduceOp::kAvg},
    {DataType::kUInt8, ReduceOp::kBand},      {DataType::kInt32, ReduceOp::kSum},
    {DataType::kInt32, ReduceOp::kBxor},      {DataType::kInt64, ReduceOp::kSum},
    {DataType::kInt64, ReduceOp::kAvg},       {DataType::kInt64, ReduceOp::kMin},
    {DataType::kBool, ReduceOp::kSum},        {DataType::kBool, ReduceOp::kProduct},
    {DataType::kBool, ReduceOp::kBxor},
};
const Case kOtherReduceCases[] = {
    {DataType::kFloat32, ReduceOp::kSum},  {DataType::kFloat32, ReduceOp::kAvg},
    {DataType::kBFloat16, ReduceOp::kAvg}, {DataType::kFloat16, ReduceOp::kMax},
    {DataType::kInt64, ReduceOp::kBxor},   {DataType::kInt8, ReduceOp::kProduct},
    {DataType::kBool, ReduceOp::kMax},
};

struct Param {
  int world;
  Mode mode;
};

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.mode == Mode::kOneShot ? "one_shot" : "two_shot") + "_world" +
         std::to_string(info.param.world);
}

class ShmReductions : public ::testing::TestWithParam<Param> {
 protected:
  int world() const { return GetParam().world; }
  algo::Tunables tunables() const { return tunablesFor(GetParam().mode); }
};

TEST_P(ShmReductions, AllReduce) {
  const Case large{DataType::kFloat32, ReduceOp::kSum};
  testing::runShmRanks(world(), kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment, tunables());
    auto run = [&](const Case& c, size_t count) {
      TypedBuffer data = testing::contributions(c, world(), rank, count);
      algo::shm::allReduce(calls.next("allreduce"), data.data(), count, c.type, c.op);
      EXPECT_TRUE(matches(data, [&](size_t i) { return reduced(c, world(), i); }))
          << describe(c, count, rank);
    };
    for (const Case& c : kAllReduceCases) {
      for (size_t count : kCounts) run(c, count);
    }
    run(large, kLarge);
  });
}

TEST_P(ShmReductions, ReduceToEveryRootLeavesOthersUnchanged) {
  testing::runShmRanks(world(), kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment, tunables());
    for (const Case& c : kOtherReduceCases) {
      for (size_t count : kCounts) {
        for (int root = 0; root < world(); ++root) {
          TypedBuffer data = testing::contributions(c, world(), rank, count);
          const std::vector<uint8_t> before = data.bytes();
          algo::shm::reduce(calls.next("reduce"), data.data(), count, c.type, c.op, root);
          if (rank == root) {
            EXPECT_TRUE(matches(data, [&](size_t i) { return reduced(c, world(), i); }))
                << describe(c, count, rank) << " root " << root;
          } else {
            EXPECT_EQ(data.bytes(), before) << describe(c, count, rank) << " root " << root;
          }
        }
      }
    }
  });
}

TEST_P(ShmReductions, ReduceScatter) {
  testing::runShmRanks(world(), kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment, tunables());
    for (const Case& c : kOtherReduceCases) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}}) {
        // Block-major input: element b * count + i belongs to rank b's result.
        TypedBuffer input = testing::contributions(c, world(), rank, count * world());
        TypedBuffer output(c.type, count);
        algo::shm::reduceScatter(calls.next("reduce_scatter"), input.data(), output.data(), count,
                                 c.type, c.op);
        auto expected = [&](size_t i) { return reduced(c, world(), rank * count + i); };
        EXPECT_TRUE(matches(output, expected)) << describe(c, count, rank);
      }
    }
  });
}

// Random floats over many binades: sums depend on the order, so each rank's bytes must equal a
// reduceMany over the inputs in rank order (which also makes them equal across ranks).
TEST_P(ShmReductions, RandomFloatsGiveTheRankOrderBytesOnEveryRank) {
  struct FloatCase {
    DataType type;
    ReduceOp op;
    size_t count;
  };
  const FloatCase cases[] = {
      {DataType::kFloat32, ReduceOp::kSum, 4099},  {DataType::kFloat32, ReduceOp::kAvg, 30011},
      {DataType::kFloat64, ReduceOp::kSum, 1001},  {DataType::kFloat16, ReduceOp::kSum, 4099},
      {DataType::kBFloat16, ReduceOp::kSum, 4099}, {DataType::kBFloat16, ReduceOp::kAvg, 7},
  };
  const int n = world();
  std::vector<std::vector<TypedBuffer>> inputs(std::size(cases));
  std::vector<std::vector<uint8_t>> expected(std::size(cases));
  for (size_t k = 0; k < std::size(cases); ++k) {
    const FloatCase& c = cases[k];
    std::vector<const void*> srcs;
    for (int r = 0; r < n; ++r) {
      std::mt19937_64 random(k * 100 + r);
      std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
      std::uniform_int_distribution<int> exponent(elementSize(c.type) == 2 ? -4 : -20, 6);
      inputs[k].emplace_back(c.type, c.count);
      for (size_t i = 0; i < c.count; ++i) {
        inputs[k][r].set(i, std::ldexp(mantissa(random), exponent(random)));
      }
    }
    for (int r = 0; r < n; ++r) srcs.push_back(inputs[k][r].data());
    TypedBuffer result(c.type, c.count);
    algo::reduceMany(algo::Isa::kScalar, c.type, algo::combinerOf(c.op), result.data(), srcs.data(),
                     n, c.count);
    if (c.op == ReduceOp::kAvg) algo::divide(c.type, result.data(), c.count, n);
    expected[k] = result.bytes();
  }
  testing::runShmRanks(n, kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment, tunables());
    for (size_t k = 0; k < std::size(cases); ++k) {
      TypedBuffer data = inputs[k][rank];
      algo::shm::allReduce(calls.next("allreduce"), data.data(), cases[k].count, cases[k].type,
                           cases[k].op);
      EXPECT_TRUE(data.bytes() == expected[k])
          << dataTypeName(cases[k].type) << " " << reduceOpName(cases[k].op) << " count "
          << cases[k].count << " on rank " << rank;
    }
  });
}

std::vector<Param> allParams() {
  std::vector<Param> params;
  for (int world : {1, 2, 3, 4, 5}) {
    for (Mode mode : {Mode::kOneShot, Mode::kTwoShot}) params.push_back({world, mode});
  }
  return params;
}
INSTANTIATE_TEST_SUITE_P(Worlds, ShmReductions, ::testing::ValuesIn(allParams()), paramName);

TEST(ShmTunables, TwoShotThresholdScalesWithTheTrafficItSaves) {
  algo::Tunables t;
  EXPECT_EQ(algo::shmTwoShotThreshold(4, t), algo::kShmTwoShotMinBytes);
  EXPECT_EQ(algo::shmTwoShotThreshold(2, t), SIZE_MAX) << "two-shot saves nothing for 2 ranks";
  EXPECT_EQ(algo::shmTwoShotThreshold(1, t), SIZE_MAX);
  const size_t three = algo::shmTwoShotThreshold(3, t), eight = algo::shmTwoShotThreshold(8, t);
  EXPECT_NEAR(static_cast<double>(three) / algo::kShmTwoShotMinBytes, 1.75 / (1 - 1.0 / 3), 1e-6);
  EXPECT_NEAR(static_cast<double>(eight) / algo::kShmTwoShotMinBytes, 1.75 / (6 - 1.0 / 8), 1e-6);
  EXPECT_GT(three, algo::shmTwoShotThreshold(5, t));
  t.shmTwoShotMinBytes = 0;
  EXPECT_EQ(algo::shmTwoShotThreshold(2, t), 0u) << "0 forces two-shot";
  t.shmTwoShotMinBytes = SIZE_MAX;
  EXPECT_EQ(algo::shmTwoShotThreshold(8, t), SIZE_MAX) << "SIZE_MAX forces one-shot";
  if (std::getenv("XCCL_SHM_TWO_SHOT_BYTES") == nullptr) {
    EXPECT_EQ(algo::Tunables::fromEnvironment().shmTwoShotMinBytes, algo::kShmTwoShotMinBytes);
  }
}

}  // namespace
}  // namespace xccl
