// The collectives of collectives.h over the libfabric transport (tcp;ofi_rxm on loopback), ranks
// as threads: the same checks as over TCP (test_collectives.cc, test_data_movement.cc) for a few
// dtypes, counts 0, 1, odd and > 1M, both algorithms, every root.
#include "ofi_harness.h"
#include "tcp_collectives.h"

namespace xccl {
namespace {

using testing::Calls;
using testing::CollectiveParam;

class OfiCollectives : public ::testing::TestWithParam<CollectiveParam> {};

const testing::ReduceCase kCases[] = {{DataType::kFloat32, ReduceOp::kSum},
                                      {DataType::kBFloat16, ReduceOp::kAvg},
                                      {DataType::kInt64, ReduceOp::kBxor}};

TEST_P(OfiCollectives, AllReduceBroadcastAllGather) {
  const int world = GetParam().world;
  testing::runOfiRanks(world, [&](int rank, net::Transport& transport) {
    Calls calls(transport, GetParam().algorithm);
    std::vector<size_t> counts(std::begin(testing::kSmallCounts), std::end(testing::kSmallCounts));
    counts.push_back(testing::kLarge);
    for (const auto& c : kCases) {
      for (size_t count : counts) {
        if (count == testing::kLarge && c.type != DataType::kFloat32) continue;
        testing::TypedBuffer data = testing::contributions(c, world, rank, count);
        algo::allReduce(calls.next("allreduce"), data.data(), count, c.type, c.op);
        EXPECT_TRUE(testing::matches(data, [&](size_t i) { return testing::reduced(c, world, i); }))
            << testing::describe(c, count, rank);
      }
    }
    for (size_t count : counts) {
      for (int root = 0; root < world; ++root) {
        std::vector<uint8_t> data = rank == root ? testing::filled(count * 4 + 1, root, 2)
                                                 : std::vector<uint8_t>(count * 4 + 1, 0);
        algo::broadcast(calls.next("broadcast"), data.data(), data.size(), root);
        EXPECT_TRUE(testing::hasPattern(data.data(), data.size(), root, 2)) << count;
      }
      testing::AllGatherBuffers b(std::vector<size_t>(world, count * 4), rank, false);
      algo::allGather(calls.next("allgather"), b.in, b.output.data(), b.bytes);
      b.expectGathered(rank, "");
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, OfiCollectives,
                         ::testing::Values(CollectiveParam{2, algo::Algorithm::kRing},
                                           CollectiveParam{3, algo::Algorithm::kDirect},
                                           CollectiveParam{3, algo::Algorithm::kRing}),
                         testing::paramName);

}  // namespace
}  // namespace xccl
