// The data-movement shm collectives, ranks as threads over 4 KiB slots: broadcast, all_gather
// (uneven, in place), all_to_all (uneven, gaps, many steps), gather, scatter, barrier; and a
// long mixed sequence that reuses the slots back to back.
#include <gtest/gtest.h>

#include <atomic>
#include <random>

#include "algo/reduce.h"
#include "shm_testing.h"

namespace xccl {
namespace {

using testing::ShmCalls;

constexpr size_t kSlot = 4096;
constexpr uint8_t kUntouched = 0xee;

uint8_t pattern(int a, int b, size_t j) {
  // (a * 8 + b) * 37 is distinct mod 256 for a, b < 8: parts from different ranks differ.
  return static_cast<uint8_t>(j * 131 + (j >> 9) * 7 + (a * 8 + b) * 37 + 1);
}

std::vector<uint8_t> filled(size_t bytes, int a, int b) {
  std::vector<uint8_t> data(bytes);
  for (size_t j = 0; j < bytes; ++j) data[j] = pattern(a, b, j);
  return data;
}

::testing::AssertionResult hasPattern(const uint8_t* data, size_t bytes, int a, int b) {
  for (size_t j = 0; j < bytes; ++j) {
    if (data[j] != pattern(a, b, j)) {
      return ::testing::AssertionFailure() << "byte " << j << " of " << bytes << " is "
                                           << int(data[j]) << ", expected "
                                           << int(pattern(a, b, j));
    }
  }
  return ::testing::AssertionSuccess();
}

class ShmExchange : public ::testing::TestWithParam<int> {
 protected:
  int world() const { return GetParam(); }
};

TEST_P(ShmExchange, BroadcastFromEveryRoot) {
  testing::runShmRanks(world(), kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment);
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{29}, size_t{4096}, size_t{3 * 4096 + 5}}) {
      for (int root = 0; root < world(); ++root) {
        std::vector<uint8_t> data = rank == root ? filled(bytes, root, 2)
                                                 : std::vector<uint8_t>(bytes, kUntouched);
        algo::shm::broadcast(calls.next("broadcast"), data.data(), bytes, root);
        EXPECT_TRUE(hasPattern(data.data(), bytes, root, 2))
            << bytes << " bytes from root " << root << " on rank " << rank;
      }
    }
  });
}

TEST_P(ShmExchange, AllGatherUnevenAndInPlace) {
  const int n = world();
  std::vector<std::vector<size_t>> layouts;
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{28}, size_t{16396}}) {
    layouts.emplace_back(n, bytes);
  }
  std::vector<size_t> uneven, single(n, 0);
  for (int r = 0; r < n; ++r) uneven.push_back(r % 3 == 1 ? 0 : 1 + r * 4099);
  single[n - 1] = 9001;
  layouts.push_back(uneven);
  layouts.push_back(single);
  testing::runShmRanks(n, kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment);
    for (const auto& layout : layouts) {
      for (bool inPlace : {false, true}) {
        std::vector<size_t> offset(n);
        size_t total = 0;
        for (int r = 0; r < n; ++r) offset[r] = total, total += layout[r];
        std::vector<uint8_t> output(total, kUntouched);
        std::vector<uint8_t> input = filled(layout[rank], rank, 3);
        const void* in = input.data();
        if (inPlace) {
          std::copy(input.begin(), input.end(), output.begin() + offset[rank]);
          in = output.data() + offset[rank];
        }
        algo::shm::allGather(calls.next("allgather"), in, output.data(), layout);
        for (int r = 0; r < n; ++r) {
          EXPECT_TRUE(hasPattern(output.data() + offset[r], layout[r], r, 3))
              << "part " << r << " on rank " << rank << (inPlace ? " (in place)" : "");
        }
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
      std::vector<size_t> sendOffsets(n), sendLengths(n), recvOffsets(n), recvLengths(n);
      size_t inBytes = 0, outBytes = 0;
      for (int peer = 0; peer < n; ++peer) {
        sendLengths[peer] = length(rank, peer);
        sendOffsets[peer] = inBytes;
        inBytes += sendLengths[peer] + 3;
      }
      for (int peer = n - 1; peer >= 0; --peer) {  // received parts in reverse order, with gaps
        recvLengths[peer] = length(peer, rank);
        recvOffsets[peer] = outBytes;
        outBytes += recvLengths[peer] + 5;
      }
      std::vector<uint8_t> input(inBytes, 0), output(outBytes, kUntouched);
      for (int peer = 0; peer < n; ++peer) {
        std::vector<uint8_t> part = filled(sendLengths[peer], rank, peer);
        std::copy(part.begin(), part.end(), input.begin() + sendOffsets[peer]);
      }
      algo::shm::allToAll(calls.next("alltoall"), input.data(), sendOffsets, sendLengths,
                          output.data(), recvOffsets, recvLengths);
      std::vector<bool> covered(outBytes, false);
      for (int peer = 0; peer < n; ++peer) {
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
