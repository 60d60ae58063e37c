// The data-movement shm collectives, ranks as threads over 4 KiB slots: broadcast, all_gather
// (uneven, in place), all_to_all (uneven, gaps, many steps), gather, scatter, barrier; and a
// long mixed sequence that reuses the slots back to back.
#include <gtest/gtest.h>

#include <atomic>
#include <random>

#include "algo/reduce.h"
#include "collective_cases.h"
#include "shm_testing.h"

namespace xccl {
namespace {

using testing::AllGatherBuffers;
using testing::AllToAllBuffers;
using testing::filled;
using testing::hasPattern;
using testing::kUntouched;
using testing::ShmCalls;

constexpr size_t kSlot = 4096;
class ShmExchange : public ::testing::TestWithParam<int> {
 protected:
  int world() const { return GetParam(); }
};

TEST_P(ShmExchange, BroadcastFromEveryRoot) {
  testing::runShmRanks(world(), kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment);
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{29}, size_t{4096}, size_t{3 * 4096 + 5}}) {
      for (int root = 0; root < world(); ++root) {
        std::vector<uint8_t> data =
            rank == root ? filled(bytes, root, 2) : std::vector<uint8_t>(bytes, kUntouched);
        algo::shm::broadcast(calls.next("broadcast"), data.data(), bytes, root);
        EXPECT_TRUE(hasPattern(data.data(), bytes, root, 2))
            << bytes << " bytes from root " << root << " on rank " << rank;
      }
    }
  });
}

TEST_P(ShmExchange, AllGatherUnevenAndInPlace) {
  const int n = world();
  const auto layouts = testing::allGatherLayouts(n, {0, 1, 28, 16396});
  testing::runShmRanks(n, kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment);
    for (const auto& layout : layouts) {
      for (bool inPlace : {false, true}) {
        AllGatherBuffers b(layout, rank, inPlace);
        algo::shm::allGather(calls.next("allgather"), b.in, b.output.data(), layout);
        b.expectGathered(rank, inPlace ? " (in place)" : "");
      }
    }
  });
}

// Bytes from `src` to `dst`: zeros and odd sizes; variant 4 spans many steps.
size_t allToAllBytes(int src, int dst, int variant) {
  const int m = (src * 3 + dst * 5 + variant) % 4;
  return m == 0 ? 0 : (m * 1031 + src) * (variant == 4 ? 16 : 1);
}

TEST_P(ShmExchange, AllToAllUnevenSplits) {
  const int n = world();
  testing::runShmRanks(n, kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment);
    for (int variant = 0; variant < 6; ++variant) {
      // Variant 5: nobody sends anything (one step still runs, to agree on that).
      auto length = [&](int src, int dst) {
        return variant == 5 ? 0 : allToAllBytes(src, dst, variant);
      };
      AllToAllBuffers b(n, rank, length);
      algo::shm::allToAll(calls.next("alltoall"), b.input.data(), b.sendOffsets, b.sendLengths,
                          b.output.data(), b.recvOffsets, b.recvLengths);
      b.expectReceived(rank, "variant " + std::to_string(variant));
    }
  });
}

TEST_P(ShmExchange, GatherAndScatterAtEveryRoot) {
  const int n = world();
  testing::runShmRanks(n, kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment);
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{7}, size_t{5003}}) {
      for (int root = 0; root < n; ++root) {
        std::vector<uint8_t> input = filled(bytes, rank, 0);
        std::vector<uint8_t> gathered(rank == root ? bytes * n : 0, kUntouched);
        algo::shm::gather(calls.next("gather"), input.data(), bytes,
                          rank == root ? gathered.data() : nullptr, root);
        for (int r = 0; rank == root && r < n; ++r) {
          EXPECT_TRUE(hasPattern(gathered.data() + r * bytes, bytes, r, 0))
              << "gather part " << r << " at root " << root;
        }
        std::vector<uint8_t> blocks;
        for (int r = 0; rank == root && r < n; ++r) {
          std::vector<uint8_t> part = filled(bytes, r, 1);
          blocks.insert(blocks.end(), part.begin(), part.end());
        }
        std::vector<uint8_t> mine(bytes, kUntouched);
        algo::shm::scatter(calls.next("scatter"), rank == root ? blocks.data() : nullptr,
                           mine.data(), bytes, root);
        EXPECT_TRUE(hasPattern(mine.data(), bytes, rank, 1))
            << bytes << " bytes scattered from root " << root << " on rank " << rank;
      }
    }
  });
}

TEST_P(ShmExchange, BarrierWaitsForEveryRank) {
  const int n = world();
  std::atomic<int> arrived{0};
  testing::runShmRanks(n, kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment);
    for (int round = 1; round <= 20; ++round) {
      if (rank == round % n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      arrived.fetch_add(1);
      algo::shm::barrier(calls.next("barrier"));
      EXPECT_GE(arrived.load(), n * round)
          << "rank " << rank << " left barrier " << round << " early";
    }
  });
  EXPECT_EQ(arrived.load(), n * 20);
}

INSTANTIATE_TEST_SUITE_P(Worlds, ShmExchange, ::testing::Values(1, 2, 3, 4, 5));

// Hundreds of collectives of random kinds and sizes back to back (the same sequence on every
// rank): a rank that overwrote a slot a slower peer still reads would corrupt some result.
TEST(ShmSequence, MixedCollectivesReuseSlotsSafely) {
  constexpr int kWorld = 4, kRounds = 400;
  testing::runShmRanks(kWorld, kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment);
    std::mt19937 random(12345);  // same seed: every rank draws the same sequence
    for (int round = 0; round < kRounds; ++round) {
      const int kind = random() % 4;
      const size_t count = random() % 3 == 0 ? random() % 5000 : random() % 40;
      const int root = random() % kWorld;
      calls.tunables().shmTwoShotMinBytes = random() % 2 ? 0 : SIZE_MAX;
      if (rank == round % kWorld && round % 7 == 0) std::this_thread::yield();
      std::vector<int32_t> data(count);
      for (size_t i = 0; i < count; ++i) {
        data[i] = static_cast<int32_t>(i * 7 + rank * 1000 + round);
      }
      if (kind == 0) {
        algo::shm::allReduce(calls.next("allreduce"), data.data(), count, DataType::kInt32,
                             ReduceOp::kSum);
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(data[i], static_cast<int32_t>(kWorld * (i * 7 + round) + 6000))
              << "round " << round;
        }
      } else if (kind == 1) {
        algo::shm::broadcast(calls.next("broadcast"), data.data(), count * 4, root);
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(data[i], static_cast<int32_t>(i * 7 + root * 1000 + round))
              << "round " << round;
        }
      } else if (kind == 2) {
        std::vector<int32_t> all(count * kWorld);
        algo::shm::allGather(calls.next("allgather"), data.data(), all.data(),
                             std::vector<size_t>(kWorld, count * 4));
        for (size_t j = 0; j < all.size(); ++j) {
          const size_t r = j / std::max<size_t>(count, 1), i = j % std::max<size_t>(count, 1);
          ASSERT_EQ(all[j], static_cast<int32_t>(i * 7 + r * 1000 + round)) << "round " << round;
        }
      } else {
        algo::shm::reduce(calls.next("reduce"), data.data(), count, DataType::kInt32,
                          ReduceOp::kMax, root);
        for (size_t i = 0; rank == root && i < count; ++i) {
          ASSERT_EQ(data[i], static_cast<int32_t>(i * 7 + 3000 + round)) << "round " << round;
        }
      }
    }
  });
}

}  // namespace
}  // namespace xccl
