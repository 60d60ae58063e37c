// GPU tests of the collective kernels with virtual ranks (N streams on one GPU), compared bit for
// bit with the CPU reference (fp32 accumulation in rank order is the kernels' definition, so
// every dtype and both all-reduce algorithms must match exactly, and all ranks agree).
// Without a CUDA device every test skips; that is the only skip.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "gpu/reference.h"
#include "gpu/virtual_ranks.h"
#include "kernels/launch.h"
#include "kernels/launch_checks.h"

namespace xccl::testing {
namespace {

using kernels::Algorithm;

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!gpuAvailable()) GTEST_SKIP() << "no GPU device: GPU kernel tests skipped";
  }
};

const DataType kDtypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kPreMulSum, ReduceOp::kMin,
                         ReduceOp::kMax};
constexpr float kFactor = 0.37f;
// 0, tails around the 16-byte vector widths (4 and 8 elements), and sizes spanning many blocks.
const size_t kCounts[] = {0, 1, 2, 3, 7, 8, 9, 15, 17, 33, 1000, 4097, 65539, (1u << 20) + 5};
constexpr size_t kLargeCount = (1u << 22) + 5;  // SUM only: many blocks, multi-MB per rank

std::vector<Bytes> makeInputs(DataType dtype, size_t count, int world, uint64_t seed) {
  std::vector<Bytes> inputs;
  for (int p = 0; p < world; ++p) inputs.push_back(randomElements(dtype, count, seed * 131 + p));
  return inputs;
}

std::string label(DataType dtype, ReduceOp op, size_t count, int world) {
  return std::string(dataTypeName(dtype)) + " " + reduceOpName(op) + " count " +
         std::to_string(count) + " world " + std::to_string(world);
}

// Runs one all-reduce on all ranks; offsets are in elements into every buffer / output.
void checkAllReduce(VirtualRanks& vr, Algorithm algorithm, DataType dtype, ReduceOp op,
                    size_t count, size_t inOffset, size_t outOffset, bool inPlace, uint64_t seed) {
  const size_t size = elementSize(dtype);
  const std::vector<Bytes> inputs = makeInputs(dtype, count, vr.world(), seed);
  for (int p = 0; p < vr.world(); ++p) vr.upload(vr.buffer(p) + inOffset * size, inputs[p]);
  vr.forkJoin([&](int rank, gpuStream_t stream) {
    auto args = vr.args<kernels::AllReduceArgs>(rank, count, dtype, vr.shape());
    args.handle = vr.handle(rank, inOffset * size);
    args.output = inPlace ? args.handle.buffers[rank] : vr.output(rank) + outOffset * size;
    args.op = op;
    args.preMulFactor = kFactor;
    args.algorithm = algorithm;
    kernels::launchAllReduce(args, stream);
  });
  ASSERT_EQ(vr.describeErrors(), "") << label(dtype, op, count, vr.world());
  const Bytes expected = referenceReduce(dtype, op, kFactor, inputs, 0, count);
  for (int r = 0; r < vr.world(); ++r) {
    const char* out = inPlace ? vr.buffer(r) + inOffset * size : vr.output(r) + outOffset * size;
    ASSERT_EQ(firstMismatch(dtype, expected, vr.download(out, count * size)), "")
        << label(dtype, op, count, vr.world()) << " rank " << r << " offsets " << inOffset << "/"
        << outOffset << (inPlace ? " in place" : "");
  }
}

class AllReduceTest : public GpuTest,
                      public ::testing::WithParamInterface<std::tuple<int, Algorithm, DataType>> {};

TEST_P(AllReduceTest, MatchesReferenceBitwise) {
  const auto [world, algorithm, dtype] = GetParam();
  const size_t bytes = (kLargeCount + 16) * elementSize(dtype);
  VirtualRanks vr(world, bytes, bytes);
  uint64_t seed = 1;
  for (size_t count : kCounts) {
    for (ReduceOp op : kOps) {
      checkAllReduce(vr, algorithm, dtype, op, count, 0, 0, false, seed++);
    }
  }
  checkAllReduce(vr, algorithm, dtype, ReduceOp::kSum, kLargeCount, 0, 0, false, seed++);
  // Unaligned starts: inputs and output sharing a misalignment (scalar head, then vectors), and
  // disagreeing (all scalar).
  for (size_t count : {size_t{1000}, size_t{4097}, size_t{65539}}) {
    checkAllReduce(vr, algorithm, dtype, ReduceOp::kSum, count, 1, 1, false, seed++);
    checkAllReduce(vr, algorithm, dtype, ReduceOp::kMax, count, 1, 0, false, seed++);
    checkAllReduce(vr, algorithm, dtype, ReduceOp::kAvg, count, 3, 5, false, seed++);
  }
  if (algorithm == Algorithm::kTwoShot) {
    for (size_t count : {size_t{7}, size_t{4097}, (size_t{1} << 20) + 5}) {
      checkAllReduce(vr, algorithm, dtype, ReduceOp::kSum, count, 0, 0, true, seed++);
      checkAllReduce(vr, algorithm, dtype, ReduceOp::kPreMulSum, count, 1, 0, true, seed++);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, AllReduceTest,
                         ::testing::Combine(::testing::Range(1, kernels::kMaxRanks + 1),
                                            ::testing::Values(Algorithm::kOneShot,
                                                              Algorithm::kTwoShot),
                                            ::testing::ValuesIn(kDtypes)),
                         [](const auto& info) {
                           return "W" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == Algorithm::kOneShot ? "_OneShot_"
                                                                                  : "_TwoShot_") +
                                  dataTypeName(std::get<2>(info.param));
                         });

class CollectiveTest : public GpuTest, public ::testing::WithParamInterface<int> {};

TEST_P(CollectiveTest, ReduceScatterMatchesReference) {
  const int world = GetParam();
  for (DataType dtype : kDtypes) {
    const size_t maxCount = 65539;
    VirtualRanks vr(world, (maxCount * world + 8) * 4, (maxCount + 8) * 4);
    uint64_t seed = 100;
    for (size_t count : {size_t{0}, size_t{1}, size_t{5}, size_t{9}, size_t{1000}, maxCount}) {
      for (ReduceOp op : kOps) {
        const size_t size = elementSize(dtype);
        const std::vector<Bytes> inputs = makeInputs(dtype, count * world, world, seed++);
        for (int p = 0; p < world; ++p) vr.upload(vr.buffer(p), inputs[p]);
        vr.forkJoin([&](int rank, gpuStream_t stream) {
          auto args = vr.args<kernels::ReduceScatterArgs>(rank, count, dtype, vr.shape());
          args.op = op;
          args.preMulFactor = kFactor;
          kernels::launchReduceScatter(args, stream);
        });
        ASSERT_EQ(vr.describeErrors(), "") << label(dtype, op, count, world);
        for (int r = 0; r < world; ++r) {
          const Bytes expected = referenceReduce(dtype, op, kFactor, inputs, r * count, count);
          ASSERT_EQ(firstMismatch(dtype, expected, vr.download(vr.output(r), count * size)), "")
              << label(dtype, op, count, world) << " rank " << r;
        }
      }
    }
  }
}

// The byte-copy collectives: fp16 (2-byte elements, so odd counts leave byte tails) and fp32,
// aligned and shifted by one element.
TEST_P(CollectiveTest, AllGatherBroadcastAllToAllMatchReference) {
  const int world = GetParam();
  const size_t maxCount = 300001;
  for (DataType dtype : {DataType::kFloat16, DataType::kFloat32}) {
    const size_t size = elementSize(dtype);
    VirtualRanks vr(world, (maxCount * world + 8) * size, (maxCount * world + 8) * size);
    uint64_t seed = 200;
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{8}, size_t{1001}, maxCount}) {
      for (size_t offset : {size_t{0}, size_t{1}}) {
        const std::vector<Bytes> inputs = makeInputs(dtype, count * world, world, seed++);
        const auto upload = [&] {
          for (int p = 0; p < world; ++p) vr.upload(vr.buffer(p) + offset * size, inputs[p]);
        };
        const auto download = [&](int r, size_t elements) {
          return vr.download(vr.output(r), elements * size);
        };
        const std::string what =
            label(dtype, ReduceOp::kSum, count, world) + " offset " + std::to_string(offset);

        upload();
        vr.forkJoin([&](int rank, gpuStream_t stream) {
          kernels::AllGatherArgs args{vr.handle(rank, offset * size), vr.output(rank), count, dtype,
                                      vr.shape()};
          kernels::launchAllGather(args, stream);
        });
        ASSERT_EQ(vr.describeErrors(), "") << what;
        Bytes gathered;
        for (int p = 0; p < world; ++p) {
          gathered.insert(gathered.end(), inputs[p].begin(), inputs[p].begin() + count * size);
        }
        for (int r = 0; r < world; ++r) {
          ASSERT_EQ(firstMismatch(dtype, gathered, download(r, count * world)), "")
              << "all-gather " << what << " rank " << r;
        }

        for (int root = 0; root < world; ++root) {
          vr.forkJoin([&](int rank, gpuStream_t stream) {
            kernels::BroadcastArgs args{
                vr.handle(rank, offset * size), vr.output(rank), count, dtype, root, vr.shape()};
            kernels::launchBroadcast(args, stream);
          });
          ASSERT_EQ(vr.describeErrors(), "") << what;
          const Bytes expected(inputs[root].begin(), inputs[root].begin() + count * size);
          for (int r = 0; r < world; ++r) {
            ASSERT_EQ(firstMismatch(dtype, expected, download(r, count)), "")
                << "broadcast " << what << " root " << root << " rank " << r;
          }
        }

        vr.forkJoin([&](int rank, gpuStream_t stream) {
          kernels::AllToAllArgs args{vr.handle(rank, offset * size), vr.output(rank), count, dtype,
                                     vr.shape()};
          kernels::launchAllToAll(args, stream);
        });
        ASSERT_EQ(vr.describeErrors(), "") << what;
        for (int r = 0; r < world; ++r) {
          Bytes expected;
          for (int p = 0; p < world; ++p) {
            const auto first = inputs[p].begin() + r * count * size;
            expected.insert(expected.end(), first, first + count * size);
          }
          ASSERT_EQ(firstMismatch(dtype, expected, download(r, count * world)), "")
              << "all-to-all " << what << " rank " << r;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, CollectiveTest, ::testing::Range(1, kernels::kMaxRanks + 1),
                         [](const auto& info) { return "W" + std::to_string(info.param); });

// In-place all-gather: rank r's input is its own chunk of its output, as c10d's
// all_gather_into_tensor does with a view.
TEST_F(GpuTest, AllGatherInPlace) {
  for (int world : {2, 3, 8}) {
    const size_t count = 4097;
    const size_t chunk = count * 2;
    VirtualRanks vr(world, 16, chunk * world);
    const std::vector<Bytes> inputs = makeInputs(DataType::kBFloat16, count, world, 7);
    for (int p = 0; p < world; ++p) vr.upload(vr.output(p) + p * chunk, inputs[p]);
    vr.forkJoin([&](int rank, gpuStream_t stream) {
      kernels::AllGatherArgs args{vr.handle(rank), vr.output(rank), count, DataType::kBFloat16,
                                  vr.shape()};
      for (int p = 0; p < world; ++p) args.handle.buffers[p] = vr.output(p) + p * chunk;
      kernels::launchAllGather(args, stream);
    });
    ASSERT_EQ(vr.describeErrors(), "");
    Bytes expected;
    for (const Bytes& in : inputs) expected.insert(expected.end(), in.begin(), in.end());
    for (int r = 0; r < world; ++r) {
      const Bytes actual = vr.download(vr.output(r), chunk * world);
      ASSERT_EQ(firstMismatch(DataType::kBFloat16, expected, actual), "")
          << "world " << world << " rank " << r;
    }
  }
}

// Capture one all-reduce per rank into that rank's own CUDA graph (as each process of a group
// does), then replay them 20 times with new inputs, with eager launches in between: the epochs
// advance on the device, so neither replays nor mixing need any host-side sequence number. Each
// rank's graph is launched on its own stream (VirtualRanks::replay), so the ranks run
// concurrently exactly as eager launches do; the test no longer depends on CUDA running the
// parallel branches of one graph at the same time, which it does not promise.
TEST_F(GpuTest, GraphReplaysStayCorrect) {
  for (int world : {2, 4, 8}) {
    for (Algorithm algorithm : {Algorithm::kOneShot, Algorithm::kTwoShot}) {
      for (size_t count : {size_t{4099}, size_t{1} << 18}) {
        const DataType dtype = DataType::kBFloat16;
        const size_t bytes = count * elementSize(dtype);
        VirtualRanks vr(world, bytes, bytes);
        const auto body = [&](int rank, gpuStream_t stream) {
          auto args = vr.args<kernels::AllReduceArgs>(rank, count, dtype, vr.shape());
          args.algorithm = algorithm;
          kernels::launchAllReduce(args, stream);
        };
        vr.capture(body);
        for (int replay = 0; replay < 20; ++replay) {
          const std::vector<Bytes> inputs = makeInputs(dtype, count, world, 1000 + replay);
          for (int p = 0; p < world; ++p) vr.upload(vr.buffer(p), inputs[p]);
          if (replay % 5 == 4) {
            vr.forkJoin(body);  // eager, between replays
          } else {
            vr.replay();
          }
          ASSERT_EQ(vr.describeErrors(), "") << "replay " << replay;
          const Bytes expected = referenceReduce(dtype, ReduceOp::kSum, 1, inputs, 0, count);
          for (int r = 0; r < world; ++r) {
            ASSERT_EQ(firstMismatch(dtype, expected, vr.download(vr.output(r), bytes)), "")
                << "world " << world << " replay " << replay << " rank " << r;
          }
        }
      }
    }
  }
}

// Thousands of launches without a host sync, with grids of different sizes (so per-block epochs
// advance unevenly across blocks), then a checked all-reduce: flags never need a reset.
TEST_F(GpuTest, BackToBackLaunchesWithChangingGrids) {
  const int world = 4;
  const size_t counts[] = {5, 70000, 1u << 20, 300};
  VirtualRanks vr(world, (1u << 20) * 4 * world, (1u << 20) * 4 * world);
  const std::vector<Bytes> inputs = makeInputs(DataType::kFloat32, (1u << 20) * world, world, 3);
  for (int p = 0; p < world; ++p) vr.upload(vr.buffer(p), inputs[p]);
  for (int i = 0; i < 2000; ++i) {
    const size_t count = counts[i % 4];
    vr.forkJoin([&](int rank, gpuStream_t stream) {
      const kernels::LaunchShape shape = vr.shape();
      constexpr DataType kF32 = DataType::kFloat32;
      if (i % 3 == 0) {
        kernels::launchAllReduce(vr.args<kernels::AllReduceArgs>(rank, count, kF32, shape), stream);
      } else if (i % 3 == 1) {
        kernels::launchAllGather(vr.args<kernels::AllGatherArgs>(rank, count, kF32, shape), stream);
      } else {
        kernels::launchReduceScatter(vr.args<kernels::ReduceScatterArgs>(rank, count, kF32, shape),
                                     stream);
      }
    });
  }
  ASSERT_EQ(vr.describeErrors(), "");
  checkAllReduce(vr, Algorithm::kOneShot, DataType::kFloat32, ReduceOp::kSum, 70001, 0, 0, false,
                 9);
}

// A rank that never arrives: the others' bounded spins record the timeout and the missing rank,
// return, and later launches on the poisoned handle return at once; after a reset all is well.
TEST_F(GpuTest, MissingPeerTimesOutInsteadOfHanging) {
  VirtualRanks vr(2, 4096, 4096);
  vr.setTimeoutNs(50ull * 1000 * 1000);
  auto args = vr.args<kernels::AllReduceArgs>(0, 1000, DataType::kFloat32, vr.shape());
  kernels::launchAllReduce(args, vr.stream(0));  // rank 1 never launches
  std::vector<uint32_t> words = vr.errors();
  EXPECT_EQ(words[0], kernels::kErrorTimeout | (1u << 1)) << kernels::describeDeviceError(words[0]);
  EXPECT_EQ(words[1], 0u);

  // Poisoned: returns at once even with a one-minute bound.
  vr.setTimeoutNs(60ull * 1000 * 1000 * 1000);
  args.handle = vr.handle(0);
  const auto start = std::chrono::steady_clock::now();
  kernels::launchAllReduce(args, vr.stream(0));
  words = vr.errors();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(words[0], kernels::kErrorTimeout | (1u << 1));

  vr.resetSync();
  vr.setTimeoutNs(kernels::kDefaultTimeoutNs);
  checkAllReduce(vr, Algorithm::kTwoShot, DataType::kFloat32, ReduceOp::kSum, 1000, 0, 0, false, 5);
}

TEST_F(GpuTest, LaunchersRejectBadArgumentsBeforeEnqueuing) {
  VirtualRanks vr(2, 4096, 4096);
  kernels::AllReduceArgs args;
  args.handle = vr.handle(0);
  args.output = vr.output(0);
  args.count = 10;
  args.dtype = DataType::kInt32;
  try {
    kernels::launchAllReduce(args, vr.stream(0));
    FAIL() << "int32 all-reduce accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
  args.dtype = DataType::kFloat32;
  args.output = args.handle.buffers[0];
  EXPECT_THROW(kernels::launchAllReduce(args, vr.stream(0)), Error) << "one-shot in place";
  EXPECT_EQ(vr.describeErrors(), "");
}

}  // namespace
}  // namespace xccl::testing
