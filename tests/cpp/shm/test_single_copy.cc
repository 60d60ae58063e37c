// The single-copy path of the shm collectives (algo/shm_single_copy.cc): for float32, bfloat16
// and int64 with SUM, MAX and AVG, 2 and 3 ranks, odd sizes of many chunks, all_reduce, reduce,
// all_gather and broadcast give exactly the bytes of the slot path (and the exact values where they
// are known), and the traffic counter proves which path ran; the built-in thresholds per
// collective choose the path around each threshold with exact results.
#include <cstring>
#include <limits>
#include <random>

#include "algo/shm_steps.h"
#include "shm_testing.h"

namespace xccl {
namespace {

using testing::ShmCalls;

constexpr size_t kSlot = 64 << 10;

// Skips where the kernel or a seccomp filter forbids process_vm_readv even on oneself (thread
// ranks read their own process).
#define SKIP_WITHOUT_CMA()                                                        \
  do {                                                                            \
    uint64_t word = 1, into = 0;                                                  \
    size_t failed = 0;                                                            \
    const net::shm::CmaPiece piece{reinterpret_cast<uintptr_t>(&word), &into, 8}; \
    const int err = net::shm::cmaTryRead(::getpid(), &piece, 1, &failed);         \
    if (err != 0) GTEST_SKIP() << "process_vm_readv: " << errnoText(err);         \
  } while (0)
constexpr size_t kCount = 70001;  // odd, several 128 KiB reduction chunks, many slots

struct Outcome {
  std::vector<std::vector<uint8_t>> outputs;  // per rank
  std::vector<uint64_t> cmaBytes;  // per rank
};

// Runs body(rank, calls) -> output on thread ranks, with the single copy from 0 bytes on or
// never.
Outcome runWith(int size, bool single,
                const std::function<std::vector<uint8_t>(int, ShmCalls&)>& body) {
  Outcome run{std::vector<std::vector<uint8_t>>(size), std::vector<uint64_t>(size)};
  testing::runShmRanks(size, kSlot, [&](int rank, net::shm::Segment& segment) {
    if (single && segment.cma() == nullptr) {
      XCCL_THROW(ErrorKind::kInternal, "no single copy: ", segment.cmaUnavailable());
    }
    ShmCalls calls(segment);
    calls.tunables().shmCmaMinBytes.setAll(single ? 0 : std::numeric_limits<size_t>::max());
    run.outputs[rank] = body(rank, calls);
    run.cmaBytes[rank] = segment.traffic().cma.load();
  });
  return run;
}

// Rank r's input of `count` elements: random finite values, different per rank and salt.
std::vector<uint8_t> inputOf(DataType type, size_t count, int rank, int salt) {
  std::mt19937_64 random(rank * 7919 + salt);
  std::vector<uint8_t> bytes(count * elementSize(type));
  for (size_t i = 0; i < count; ++i) {
    if (type == DataType::kInt64) {
      const int64_t v = static_cast<int64_t>(random() % 2000000001) - 1000000000;
      std::memcpy(bytes.data() + i * 8, &v, 8);
      continue;
    }
    const float f = std::uniform_real_distribution<float>(-100, 100)(random);
    if (type == DataType::kFloat32) {
      std::memcpy(bytes.data() + i * 4, &f, 4);
    } else {  // bfloat16: the float's upper half, a finite bf16
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      const uint16_t half = bits >> 16;
      std::memcpy(bytes.data() + i * 2, &half, 2);
    }
  }
  return bytes;
}

// Runs `body` both ways and checks that the outputs are equal byte for byte, that the single
// copy read `expectCma` bytes on some rank and the slot path none.
void expectSameBothWays(int size, const std::function<std::vector<uint8_t>(int, ShmCalls&)>& body,
                        const std::string& what) {
  const Outcome slots = runWith(size, false, body);
  const Outcome single = runWith(size, true, body);
  uint64_t read = 0;
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(slots.cmaBytes[r], 0u) << what;
    read += single.cmaBytes[r];
    ASSERT_EQ(single.outputs[r].size(), slots.outputs[r].size()) << what << " rank " << r;
    EXPECT_TRUE(single.outputs[r] == slots.outputs[r]) << what << ": rank " << r << " differs";
  }
  EXPECT_GT(read, 0u) << what << ": the single-copy path was not taken";
}

struct Case {
  DataType type;
  ReduceOp op;
};
const Case kCases[] = {
    {DataType::kFloat32, ReduceOp::kSum},  {DataType::kFloat32, ReduceOp::kMax},
    {DataType::kFloat32, ReduceOp::kAvg},  {DataType::kBFloat16, ReduceOp::kSum},
    {DataType::kBFloat16, ReduceOp::kMax}, {DataType::kBFloat16, ReduceOp::kAvg},
    {DataType::kInt64, ReduceOp::kSum},    {DataType::kInt64, ReduceOp::kMax},
    {DataType::kInt64, ReduceOp::kAvg},
};

std::string nameOf(int size, const Case& c) {
  return std::to_string(size) + " ranks, type " + std::to_string(static_cast<int>(c.type)) +
         ", op " + std::to_string(static_cast<int>(c.op));
}

TEST(ShmSingleCopy, AllReduceAndReduceEqualTheSlotPath) {
  SKIP_WITHOUT_CMA();
  for (int size : {2, 3}) {
    for (const Case& c : kCases) {
      expectSameBothWays(
          size,
          [&](int rank, ShmCalls& calls) {
            std::vector<uint8_t> data = inputOf(c.type, kCount, rank, 1);
            algo::shm::allReduce(calls.next("allreduce"), data.data(), kCount, c.type, c.op);
            std::vector<uint8_t> rooted = inputOf(c.type, kCount, rank, 2);
            algo::shm::reduce(calls.next("reduce"), rooted.data(), kCount, c.type, c.op, 1);
            if (rank == 1) data.insert(data.end(), rooted.begin(), rooted.end());
            return data;
          },
          "all_reduce/reduce, " + nameOf(size, c));
    }
  }
}

TEST(ShmSingleCopy, AllReduceIsExact) {
  SKIP_WITHOUT_CMA();
  for (int size : {2, 3}) {
    const Outcome run = runWith(size, true, [&](int rank, ShmCalls& calls) {
      std::vector<uint8_t> data = inputOf(DataType::kInt64, kCount, rank, 3);
      algo::shm::allReduce(calls.next("allreduce"), data.data(), kCount, DataType::kInt64,
                           ReduceOp::kSum);
      return data;
    });
    std::vector<int64_t> expected(kCount, 0);
    for (int r = 0; r < size; ++r) {
      const std::vector<uint8_t> in = inputOf(DataType::kInt64, kCount, r, 3);
      for (size_t i = 0; i < kCount; ++i) {
        int64_t v;
        std::memcpy(&v, in.data() + i * 8, 8);
        expected[i] += v;
      }
    }
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(std::memcmp(run.outputs[r].data(), expected.data(), kCount * 8), 0) << r;
      // Phase A reads (n - 1)/n of a slice from each peer, phase B the peers' slices.
      EXPECT_GT(run.cmaBytes[r], 0u);
    }
  }
}

// Uneven parts, in place (the input is this rank's part of the output) and not; then a
// broadcast from the last rank. Both are exact: compared with the inputs themselves.
TEST(ShmSingleCopy, AllGatherAndBroadcastAreExact) {
  SKIP_WITHOUT_CMA();
  for (int size : {2, 3}) {
    for (bool inPlace : {false, true}) {
      std::vector<size_t> parts(size);
      for (int r = 0; r < size; ++r) parts[r] = 300001 + 4099 * r;
      std::vector<uint8_t> expected;
      for (int r = 0; r < size; ++r) {
        const std::vector<uint8_t> in = inputOf(DataType::kBFloat16, parts[r] / 2 + 1, r, 5);
        expected.insert(expected.end(), in.begin(), in.begin() + parts[r]);
      }
      const std::vector<uint8_t> root = inputOf(DataType::kFloat32, kCount, size - 1, 6);
      expected.insert(expected.end(), root.begin(), root.end());
      expectSameBothWays(
          size,
          [&](int rank, ShmCalls& calls) {
            std::vector<uint8_t> in = inputOf(DataType::kBFloat16, parts[rank] / 2 + 1, rank, 5);
            in.resize(parts[rank]);
            std::vector<uint8_t> out(expected.size() - root.size());
            size_t at = 0;
            for (int r = 0; r < rank; ++r) at += parts[r];
            if (inPlace) std::memcpy(out.data() + at, in.data(), in.size());
            algo::shm::allGather(calls.next("allgather"), inPlace ? out.data() + at : in.data(),
                                 out.data(), parts);
            std::vector<uint8_t> data = rank == size - 1 ? root : std::vector<uint8_t>(root.size());
            algo::shm::broadcast(calls.next("broadcast"), data.data(), data.size(), size - 1);
            out.insert(out.end(), data.begin(), data.end());
            EXPECT_TRUE(out == expected) << "rank " << rank << " in place " << inPlace;
            return out;
          },
          "all_gather/broadcast, " + std::to_string(size) + " ranks");
    }
  }
}

// Below the threshold the slots carry the message; from it on the single copy does.
TEST(ShmSingleCopy, TheThresholdChoosesThePath) {
  SKIP_WITHOUT_CMA();
  testing::runShmRanks(2, kSlot, [&](int rank, net::shm::Segment& segment) {
    ASSERT_NE(segment.cma(), nullptr) << segment.cmaUnavailable();
    ShmCalls calls(segment);
    calls.tunables().shmCmaMinBytes.setAll(4096);
    std::vector<float> data(1023, 1.0f + rank);
    algo::shm::allReduce(calls.next("allreduce"), data.data(), data.size(), DataType::kFloat32,
                         ReduceOp::kSum);
    EXPECT_EQ(segment.traffic().cma.load(), 0u);
    data.assign(1024, 1.0f + rank);
    const uint64_t stagedBefore = segment.traffic().staged.load();
    algo::shm::allReduce(calls.next("allreduce"), data.data(), data.size(), DataType::kFloat32,
                         ReduceOp::kSum);
    // Over 2 ranks: this rank's half of the peer's slice goes through its slot (a user-space
    // copy), and the peer's reduced slice is read with one process_vm_readv.
    EXPECT_EQ(segment.traffic().staged.load() - stagedBefore, 2048u);
    EXPECT_EQ(segment.traffic().cma.load(), 2048u);
    EXPECT_EQ(data, std::vector<float>(1024, 3.0f));
  });
}

// Up to kShmCmaStagedReduceMaxBytes an all_reduce's slices are reduced through the slots and only
// the reduced slices are read with process_vm_readv; above it, the peers' parts of the slice are
// read too. Both give the exact sum.
TEST(ShmSingleCopy, SmallAllReducesStageTheirSlicesThroughTheSlots) {
  SKIP_WITHOUT_CMA();
  testing::runShmRanks(2, kSlot, [&](int rank, net::shm::Segment& segment) {
    ASSERT_NE(segment.cma(), nullptr) << segment.cmaUnavailable();
    ShmCalls calls(segment);
    net::shm::Traffic& traffic = segment.traffic();
    for (size_t bytes :
         {algo::kShmCmaStagedReduceMaxBytes, algo::kShmCmaStagedReduceMaxBytes + 64}) {
      const bool staged = bytes <= algo::kShmCmaStagedReduceMaxBytes;
      std::vector<float> data(bytes / 4, 1.0f + rank);
      const uint64_t cmaBefore = traffic.cma.load(), stagedBefore = traffic.staged.load();
      algo::shm::allReduce(calls.next("allreduce"), data.data(), data.size(), DataType::kFloat32,
                           ReduceOp::kSum);
      EXPECT_EQ(data, std::vector<float>(bytes / 4, 3.0f)) << bytes;
      const algo::shm::detail::Slice peer = algo::shm::detail::sliceOf(data.size(), 4, 2, 1 - rank);
      const uint64_t peerBytes = peer.length * 4;
      EXPECT_EQ(traffic.staged.load() - stagedBefore, staged ? peerBytes : 0u) << bytes;
      // The peer's reduced slice, and above the limit also the peer's part of this rank's slice.
      EXPECT_EQ(traffic.cma.load() - cmaBefore, staged ? peerBytes : uint64_t{bytes}) << bytes;
    }
  });
}

// Small integers, (rank + 1) * (i % 7 + 1): their sums and maxima over 3 ranks are exact in
// every dtype here, so each result is checked against its value.
void putValue(DataType type, double value, uint8_t* at) {
  if (type == DataType::kInt64) {
    const int64_t v = static_cast<int64_t>(value);
    std::memcpy(at, &v, 8);
    return;
  }
  const float f = static_cast<float>(value);
  if (type == DataType::kFloat32) {
    std::memcpy(at, &f, 4);
    return;
  }
  uint32_t bits;  // bfloat16: the float's upper half, exact for these small integers
  std::memcpy(&bits, &f, 4);
  const uint16_t half = bits >> 16;
  std::memcpy(at, &half, 2);
}

std::vector<uint8_t> smallIntegers(DataType type, size_t count, double scale) {
  const size_t elem = elementSize(type);
  std::vector<uint8_t> bytes(count * elem);
  for (size_t i = 0; i < count; ++i) putValue(type, scale * (i % 7 + 1), bytes.data() + i * elem);
  return bytes;
}

// With the built-in thresholds (a default Tunables, as a group without XCCL_SHM_CMA_MIN_BYTES
// has): all_reduce takes the single copy from 1 MiB, all_gather from 256 KiB (its output),
// broadcast and reduce never; just below, at and just above each threshold, for 2 and 3 ranks,
// three dtypes and two ops, every result is exact and the traffic counter says which path ran.
TEST(ShmSingleCopy, TheDefaultThresholdsChooseThePathPerCollective) {
  SKIP_WITHOUT_CMA();
  const algo::ShmCmaMinBytes defaults;
  ASSERT_EQ(defaults.allReduce, size_t{1} << 20);
  ASSERT_EQ(defaults.allGather, size_t{256} << 10);
  ASSERT_EQ(defaults.broadcast, SIZE_MAX);
  ASSERT_EQ(defaults.reduce, SIZE_MAX);
  const DataType types[] = {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64};
  for (int size : {2, 3}) {
    const double rankSum = size * (size + 1) / 2.0;
    for (DataType type : types) {
      const size_t elem = elementSize(type);
      testing::runShmRanks(size, kSlot, [&](int rank, net::shm::Segment& segment) {
        ASSERT_NE(segment.cma(), nullptr) << segment.cmaUnavailable();
        ShmCalls calls(segment);
        auto cmaRead = [&] { return segment.traffic().cma.load(); };
        const std::string where = std::to_string(size) + " ranks, rank " + std::to_string(rank) +
                                  ", type " + std::to_string(static_cast<int>(type));
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
          const double factor = op == ReduceOp::kSum ? rankSum : size;
          for (long delta : {-1L, 0L, 1L}) {
            const size_t count = defaults.allReduce / elem + delta;
            std::vector<uint8_t> data = smallIntegers(type, count, rank + 1);
            const uint64_t before = cmaRead();
            algo::shm::allReduce(calls.next("allreduce"), data.data(), count, type, op);
            EXPECT_TRUE(data == smallIntegers(type, count, factor))
                << "all_reduce " << count * elem << " B, " << where;
            EXPECT_EQ(cmaRead() > before, delta >= 0)
                << "all_reduce " << count * elem << " B, " << where;
            // reduce: never by default, at the same sizes and above.
            std::vector<uint8_t> rooted = smallIntegers(type, count * 2, rank + 1);
            const uint64_t beforeReduce = cmaRead();
            algo::shm::reduce(calls.next("reduce"), rooted.data(), count * 2, type, op, 1);
            if (rank == 1) {
              EXPECT_TRUE(rooted == smallIntegers(type, count * 2, factor)) << "reduce, " << where;
            }
            EXPECT_EQ(cmaRead(), beforeReduce) << "reduce " << count * 2 * elem << " B, " << where;
          }
        }
        for (long delta : {-1L, 0L, 1L}) {
          // all_gather: uneven parts whose sum (the output) is the threshold + delta bytes.
          std::vector<size_t> parts(size, defaults.allGather / size);
          parts[0] = defaults.allGather - (size - 1) * parts[1] + delta;
          std::vector<uint8_t> expected;
          for (int r = 0; r < size; ++r) {
            std::vector<uint8_t> part = smallIntegers(type, parts[r] / elem + 1, r + 1);
            expected.insert(expected.end(), part.begin(), part.begin() + parts[r]);
          }
          std::vector<uint8_t> in = smallIntegers(type, parts[rank] / elem + 1, rank + 1);
          std::vector<uint8_t> out(expected.size());
          const uint64_t before = cmaRead();
          algo::shm::allGather(calls.next("allgather"), in.data(), out.data(), parts);
          EXPECT_TRUE(out == expected) << "all_gather " << out.size() << " B, " << where;
          EXPECT_EQ(cmaRead() > before, delta >= 0)
              << "all_gather " << out.size() << " B, " << where;
        }
        for (size_t bytes : {size_t{1} << 20, size_t{4} << 20}) {
          // broadcast: never by default.
          const std::vector<uint8_t> root = smallIntegers(type, bytes / elem, 5);
          std::vector<uint8_t> data = rank == 0 ? root : std::vector<uint8_t>(bytes);
          const uint64_t before = cmaRead();
          algo::shm::broadcast(calls.next("broadcast"), data.data(), bytes, 0);
          EXPECT_TRUE(data == root) << "broadcast " << bytes << " B, " << where;
          EXPECT_EQ(cmaRead(), before) << "broadcast " << bytes << " B, " << where;
        }
      });
    }
  }
}

// The path is part of the call's signature: ranks with different thresholds fail with a
// mismatch instead of reading each other's words as something else.
TEST(ShmSingleCopy, RanksThatChoseDifferentPathsFailNamingTheMismatch) {
  SKIP_WITHOUT_CMA();
  std::vector<std::string> errors(2);
  testing::runShmRanks(2, kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment, {}, nullptr, std::chrono::seconds(20));
    calls.tunables().shmCmaMinBytes.setAll(rank == 0 ? 0 : SIZE_MAX);
    std::vector<float> data(4096, 1.0f);
    try {
      algo::shm::allReduce(calls.next("allreduce"), data.data(), data.size(), DataType::kFloat32,
                           ReduceOp::kSum);
    } catch (const Error& e) {
      errors[rank] = e.what();
    }
  });
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("with different sizes"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace xccl
