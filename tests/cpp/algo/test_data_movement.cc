// The data-movement collectives of collectives.h over real loopback TCP, ranks as threads:
// broadcast and all_gather (each algorithm forced and kAuto, counts 0, 1, odd and > 1M),
// all_to_all with uneven splits, gather and scatter at every root, barrier, and a long mixed
// sequence on one transport. Reductions: test_collectives.cc.
#include <atomic>

#include "tcp_collectives.h"

namespace xccl {
namespace {

using algo::Algorithm;
using testing::AllGatherBuffers;
using testing::AllToAllBuffers;
using testing::Calls;
using testing::Collectives;
using testing::filled;
using testing::hasPattern;
using testing::kLarge;
using testing::kOdd;
using testing::kSmallCounts;
using testing::kUntouched;
using testing::runRanks;

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

TEST_P(Collectives, AllGather) {
  runRanks(world(), [&](int rank, net::Transport& transport) {
    Calls calls(transport, algorithm());
    auto run = [&](const std::vector<size_t>& bytesPerRank, bool inPlace) {
      AllGatherBuffers b(bytesPerRank, rank, inPlace);
      algo::allGather(calls.next("allgather"), b.in, b.output.data(), bytesPerRank);
      b.expectGathered(rank, inPlace ? " (in place)" : "");
    };
    std::vector<size_t> equal;
    for (size_t count : kSmallCounts) equal.push_back(count * 4);
    for (const auto& layout : testing::allGatherLayouts(world(), equal)) {
      run(layout, false);
      run(layout, true);
    }
    if (withLarge()) run(std::vector<size_t>(world(), kLarge * 4), false);
  });
}

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
      AllToAllBuffers b(world, rank,
                        [&](int src, int dst) { return allToAllBytes(src, dst, variant); });
      algo::allToAll(calls.next("alltoall"), b.input.data(), b.sendOffsets, b.sendLengths,
                     b.output.data(), b.recvOffsets, b.recvLengths);
      b.expectReceived(rank, "variant " + std::to_string(variant));
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
        algo::scatter(calls.next("scatter"), rank == root ? blocks.data() : nullptr, mine.data(),
                      bytes, root);
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
      std::vector<uint8_t> data =
          rank == root ? filled(64, root, iter % 8) : std::vector<uint8_t>(64, kUntouched);
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
