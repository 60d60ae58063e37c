// CPU tests of the kernels' pure logic: index partitioning (partition.h, the same inline code
// the kernels run), grid sizing, argument validation and error decoding (plan.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "common/error.h"
#include "kernels/launch_checks.h"
#include "kernels/partition.h"

namespace xccl::kernels {
namespace {

const size_t kCounts[] = {0, 1, 2, 7, 15, 16, 17, 31, 100, 1000, 4099, (1u << 20) + 3};

TEST(SplitEven, TilesTheRangeInOrderOnGranuleBoundaries) {
  for (size_t count : kCounts) {
    for (size_t parts : {1, 2, 3, 7, 8, 32, 80}) {
      for (size_t granule : {1, 4, 8, 16}) {
        size_t expectedBegin = 0;
        size_t largest = 0;
        size_t smallest = SIZE_MAX;
        for (size_t i = 0; i < parts; ++i) {
          const Range r = splitEven(count, parts, i, granule);
          ASSERT_EQ(r.begin, expectedBegin) << count << " " << parts << " " << granule << " " << i;
          ASSERT_LE(r.begin, r.end);
          if (r.end != count) {
            ASSERT_EQ(r.end % granule, 0u);
          }
          expectedBegin = r.end;
          if (r.end != count) {  // the part holding the end may be partial
            largest = std::max(largest, r.size());
            smallest = std::min(smallest, r.size());
          }
        }
        EXPECT_EQ(expectedBegin, count) << count << " " << parts << " " << granule;
        if (largest > 0) {
          EXPECT_LE(largest - smallest, granule) << "unbalanced";
        }
      }
    }
  }
}

TEST(SplitForVectors, HeadAlignsEveryPointerAndPartsAddUp) {
  for (int misalignment = -1; misalignment < 16; ++misalignment) {
    for (size_t elemSize : {1, 2, 4}) {
      for (size_t count = 0; count < 80; ++count) {
        const VectorSplit s = splitForVectors(misalignment, count, elemSize);
        const size_t perVector = kVectorBytes / elemSize;
        ASSERT_EQ(s.head + s.vectors * perVector + s.tail, count);
        if (misalignment < 0 || misalignment % elemSize != 0) {
          EXPECT_EQ(s.head, count);  // no common alignment: all scalar
          continue;
        }
        EXPECT_LT(s.tail, perVector);
        EXPECT_LT(s.head, perVector);
        if (s.vectors > 0) {
          EXPECT_EQ((misalignment + s.head * elemSize) % kVectorBytes, 0u);
        }
      }
    }
  }
}

TEST(Misalignment, MergesToMinusOneOnDisagreement) {
  auto* base = reinterpret_cast<const char*>(uintptr_t{0x1000});
  int m = misalignmentOf(base + 4);
  EXPECT_EQ(m, 4);
  EXPECT_EQ(mergeMisalignment(m, base + 20), 4);
  EXPECT_EQ(mergeMisalignment(m, base + 6), -1);
  EXPECT_EQ(mergeMisalignment(-1, base), -1);
}

// Replays the index arithmetic of directReduceKernel + reduceRange on CPU for random pointer
// misalignments: every element is handled exactly once, and every vector access is aligned for
// every pointer.
TEST(KernelIndexMath, ReduceCoversEveryElementOnceWithAlignedVectors) {
  std::mt19937 rng(7);
  for (size_t elemSize : {2, 4}) {
    for (size_t count : kCounts) {
      if (count > 100000) continue;
      for (int blocks : {1, 3, 32}) {
        for (int trial = 0; trial < 4; ++trial) {
          const int world = 1 + static_cast<int>(rng() % kMaxRanks);
          std::vector<uintptr_t> bases(world + 1);  // inputs, then the output
          const bool sameAlignment = trial % 2 == 0;
          const uintptr_t shift = elemSize * (rng() % (16 / elemSize));
          for (auto& b : bases) {
            b = 0x100000 * (1 + rng() % 64) + (sameAlignment ? shift : elemSize * (rng() % 8));
          }
          std::vector<int> seen(count, 0);
          for (int b = 0; b < blocks; ++b) {
            const Range part = blockPart(Range{0, count}, blocks, b, elemSize);
            int mis = misalignmentOf(reinterpret_cast<void*>(bases[world] + part.begin * elemSize));
            for (int p = 0; p < world; ++p) {
              const auto* start = reinterpret_cast<void*>(bases[p] + part.begin * elemSize);
              mis = mergeMisalignment(mis, start);
            }
            const VectorSplit s = splitForVectors(mis, part.size(), elemSize);
            const size_t lanes = kVectorBytes / elemSize;
            for (size_t i = 0; i < s.head; ++i) seen[part.begin + i]++;
            for (size_t v = 0; v < s.vectors; ++v) {
              const size_t first = part.begin + s.head + v * lanes;
              for (uintptr_t base : bases) ASSERT_EQ((base + first * elemSize) % kVectorBytes, 0u);
              for (size_t l = 0; l < lanes; ++l) seen[first + l]++;
            }
            const size_t tail = part.begin + s.head + s.vectors * lanes;
            for (size_t i = 0; i < s.tail; ++i) seen[tail + i]++;
          }
          for (size_t i = 0; i < count; ++i) ASSERT_EQ(seen[i], 1) << "element " << i;
        }
      }
    }
  }
}

// Two-shot: stage 1 (rank s, block b) and stage 2 (any rank, block b) compute the same part of
// slice s, and the parts of all slices and blocks tile the message exactly once.
TEST(KernelIndexMath, TwoShotSlicesAndBlockPartsTileTheMessage) {
  for (size_t elemSize : {2, 4}) {
    for (size_t count : kCounts) {
      for (int world = 1; world <= kMaxRanks; ++world) {
        for (int blocks : {1, 5, 32}) {
          size_t next = 0;
          for (int s = 0; s < world; ++s) {
            const Range slice = twoShotSlice(count, world, s, elemSize);
            if (slice.end != count) {
              EXPECT_EQ(slice.end % (kVectorBytes / elemSize), 0u);
            }
            for (int b = 0; b < blocks; ++b) {
              const Range part = blockPart(slice, blocks, b, elemSize);
              ASSERT_EQ(part.begin, next) << count << " " << world << " " << s << " " << b;
              next = part.end;
            }
          }
          EXPECT_EQ(next, count);
        }
      }
    }
  }
}

TEST(Grid, ReduceBlocksGrowWithSizeAndRespectLimits) {
  EXPECT_EQ(reduceGridBlocks(1, {}), 1);
  EXPECT_EQ(reduceGridBlocks(kBytesPerBlock, {}), 1);
  EXPECT_EQ(reduceGridBlocks(kBytesPerBlock + 1, {}), 2);
  EXPECT_EQ(reduceGridBlocks(size_t{1} << 30, {}), kDefaultMaxBlocks);
  EXPECT_EQ(reduceGridBlocks(size_t{1} << 30, LaunchShape{16}), 16);
  EXPECT_EQ(reduceGridBlocks(size_t{1} << 30, LaunchShape{1000}), kMaxBlocks);
  EXPECT_THROW(reduceGridBlocks(1, LaunchShape{-1}), Error);
  int previous = 0;
  for (size_t bytes = 1; bytes < (size_t{1} << 32); bytes *= 3) {
    const int blocks = reduceGridBlocks(bytes, {});
    EXPECT_GE(blocks, previous);
    previous = blocks;
  }
}

// Replays pullCopyKernel's item loop: every (source, byte) is copied exactly once, the grid stays
// within the limit, and with enough blocks all sources start at once.
TEST(Grid, CopyItemsCoverEverySourceOnce) {
  for (int sources = 1; sources <= kMaxRanks; ++sources) {
    for (int maxBlocks : {1, 3, 8, 16, 32, 80}) {
      for (size_t chunk : {size_t{1}, size_t{100}, kBytesPerBlock * 3 + 5, size_t{1} << 26}) {
        const CopyGrid grid = copyGrid(chunk, sources, LaunchShape{maxBlocks});
        ASSERT_GE(grid.blocks, 1);
        ASSERT_LE(grid.blocks, maxBlocks);
        ASSERT_GE(grid.partsPerSource, 1);
        std::vector<std::vector<int>> seen(sources);
        const int items = sources * grid.partsPerSource;
        for (int block = 0; block < grid.blocks; ++block) {
          for (int k = block; k < items; k += grid.blocks) {
            const Range r = splitEven(chunk, grid.partsPerSource, k / sources, kVectorBytes);
            seen[k % sources].push_back(static_cast<int>(r.size()));
          }
        }
        for (int j = 0; j < sources; ++j) {
          size_t total = 0;
          for (int size : seen[j]) total += size;
          EXPECT_EQ(total, chunk) << "source " << j;
        }
        if (maxBlocks >= sources) {
          EXPECT_GE(grid.blocks, sources) << "some source waits";
        }
      }
    }
  }
}

TEST(ReduceSpec, MapsOpsOntoThreeKernels) {
  const ReduceSpec avg = reduceSpec(DataType::kBFloat16, ReduceOp::kAvg, 1, 6);
  EXPECT_EQ(avg.kind, ReduceKind::kSum);
  EXPECT_EQ(avg.preMul, 1.0f);
  EXPECT_EQ(avg.postDiv, 6.0f);
  const ReduceSpec premul = reduceSpec(DataType::kFloat16, ReduceOp::kPreMulSum, 0.25f, 6);
  EXPECT_EQ(premul.kind, ReduceKind::kSum);
  EXPECT_EQ(premul.preMul, 0.25f);
  EXPECT_EQ(premul.postDiv, 1.0f);
  EXPECT_EQ(reduceSpec(DataType::kFloat32, ReduceOp::kMin, 1, 2).kind, ReduceKind::kMin);
  EXPECT_EQ(reduceSpec(DataType::kFloat32, ReduceOp::kMax, 1, 2).kind, ReduceKind::kMax);
  const ReduceSpec sum = reduceSpec(DataType::kFloat32, ReduceOp::kSum, 3.0f, 2);
  EXPECT_EQ(sum.preMul, 1.0f) << "the factor belongs to PREMUL_SUM only";
  EXPECT_TRUE(kernelSupports(DataType::kInt64));
  EXPECT_FALSE(kernelSupports(DataType::kInt32, ReduceOp::kSum));
  EXPECT_FALSE(kernelSupports(DataType::kFloat32, ReduceOp::kProduct));
  EXPECT_FALSE(kernelSupports(DataType::kFloat64, ReduceOp::kSum));
  try {
    reduceSpec(DataType::kFloat32, ReduceOp::kBxor, 1, 2);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

// A handle with fake, distinct, 256-byte aligned addresses: validate() never dereferences.
DeviceHandle fakeHandle(int world, int rank) {
  DeviceHandle h{};
  for (int p = 0; p < world; ++p) {
    h.buffers[p] = reinterpret_cast<void*>(uintptr_t{0x10000000} * (p + 1));
    h.flags[p] = reinterpret_cast<FlagArea*>(uintptr_t{0x90000000} + p * sizeof(FlagArea));
  }
  h.epochs = reinterpret_cast<uint32_t*>(uintptr_t{0xa0000000});
  h.error = reinterpret_cast<uint32_t*>(uintptr_t{0xb0000000});
  h.timeoutNs = kDefaultTimeoutNs;
  h.rank = rank;
  h.worldSize = world;
  return h;
}

template <typename Args>
void expectInvalid(const Args& args, const char* what) {
  try {
    validate(args);
    ADD_FAILURE() << "accepted: " << what;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << what;
  }
}

char* at(void* base, size_t offset) { return static_cast<char*>(base) + offset; }

TEST(Validate, AllReduceRules) {
  AllReduceArgs a;
  a.handle = fakeHandle(4, 1);
  a.output = reinterpret_cast<void*>(uintptr_t{0xc0000000});
  a.count = 1000;
  EXPECT_NO_THROW(validate(a));
  a.algorithm = Algorithm::kTwoShot;
  a.output = a.handle.buffers[1];
  EXPECT_NO_THROW(validate(a)) << "two-shot in place";
  a.algorithm = Algorithm::kOneShot;
  expectInvalid(a, "one-shot in place");
  a.algorithm = Algorithm::kTwoShot;
  a.output = at(a.handle.buffers[1], 64);
  expectInvalid(a, "two-shot partial overlap");
  a.output = reinterpret_cast<void*>(uintptr_t{0xc0000002});
  a.dtype = DataType::kFloat32;
  expectInvalid(a, "output misaligned for fp32");
  a.output = reinterpret_cast<void*>(uintptr_t{0xc0000000});
  a.dtype = DataType::kInt32;
  expectInvalid(a, "int32 has no reduce kernel");
  a.dtype = DataType::kFloat16;
  EXPECT_NO_THROW(validate(a));

  AllReduceArgs bad = a;
  bad.handle.worldSize = 9;
  expectInvalid(bad, "world 9");
  bad = a;
  bad.handle.worldSize = 0;
  expectInvalid(bad, "world 0");
  bad = a;
  bad.handle.rank = 4;
  expectInvalid(bad, "rank outside world");
  bad = a;
  bad.handle.flags[3] = nullptr;
  expectInvalid(bad, "missing flag area");
  bad = a;
  bad.handle.buffers[2] = nullptr;
  expectInvalid(bad, "missing peer buffer");
  bad.count = 0;
  bad.output = nullptr;
  EXPECT_NO_THROW(validate(bad)) << "count 0 needs no buffers";
  bad = a;
  bad.handle.timeoutNs = 0;
  expectInvalid(bad, "zero timeout");
  bad = a;
  bad.count = SIZE_MAX / 2 + 1;  // fp16: 2 * count bytes no longer fit
  expectInvalid(bad, "byte size overflow");
}

// The device-side factor (CUDA graph capture) is PREMUL_SUM's only, and must be float-aligned.
TEST(Validate, DeviceFactorOnlyForPreMulSum) {
  AllReduceArgs a;
  a.handle = fakeHandle(2, 0);
  a.output = reinterpret_cast<void*>(uintptr_t{0xc0000000});
  a.count = 10;
  a.op = ReduceOp::kPreMulSum;
  a.preMulFactorOnDevice = reinterpret_cast<const float*>(uintptr_t{0xd0000000});
  EXPECT_NO_THROW(validate(a));
  a.op = ReduceOp::kAvg;
  expectInvalid(a, "device factor with AVG");
  a.op = ReduceOp::kPreMulSum;
  a.preMulFactorOnDevice = reinterpret_cast<const float*>(uintptr_t{0xd0000002});
  expectInvalid(a, "device factor not float-aligned");
  ReduceScatterArgs rs;
  rs.handle = fakeHandle(2, 0);
  rs.output = reinterpret_cast<void*>(uintptr_t{0xc0000000});
  rs.count = 10;
  rs.preMulFactorOnDevice = reinterpret_cast<const float*>(uintptr_t{0xd0000000});
  expectInvalid(rs, "device factor with SUM");
  rs.op = ReduceOp::kPreMulSum;
  EXPECT_NO_THROW(validate(rs));
}

TEST(Validate, InPlaceVariantsOfTheOtherCollectives) {
  const DeviceHandle h = fakeHandle(4, 2);
  const size_t count = 256;  // elements per rank, fp32: 1 KiB chunks

  ReduceScatterArgs rs;
  rs.handle = h;
  rs.count = count;
  rs.output = at(h.buffers[2], 2 * count * 4);
  EXPECT_NO_THROW(validate(rs)) << "reduce-scatter into its own chunk";
  rs.output = at(h.buffers[2], 1 * count * 4);
  expectInvalid(rs, "reduce-scatter over a chunk peers read");

  AllGatherArgs ag;
  ag.handle = h;
  ag.count = count;
  ag.output = reinterpret_cast<void*>(uintptr_t{0xc0000000});
  ag.handle.buffers[2] = at(ag.output, 2 * count * 4);
  EXPECT_NO_THROW(validate(ag)) << "all-gather in place";
  ag.handle.buffers[2] = at(ag.output, 1 * count * 4);
  expectInvalid(ag, "all-gather input at another rank's chunk");

  BroadcastArgs bc;
  bc.handle = h;
  bc.count = count;
  bc.root = 2;
  bc.output = h.buffers[2];
  EXPECT_NO_THROW(validate(bc)) << "root in place";
  bc.root = 4;
  expectInvalid(bc, "root outside world");
  bc.root = 1;
  bc.handle.buffers[0] = nullptr;  // non-root buffers are not needed
  bc.output = reinterpret_cast<void*>(uintptr_t{0xc0000000});
  EXPECT_NO_THROW(validate(bc));

  AllToAllArgs a2a;
  a2a.handle = h;
  a2a.count = count;
  a2a.output = h.buffers[2];
  expectInvalid(a2a, "all-to-all in place");
  a2a.output = reinterpret_cast<void*>(uintptr_t{0xc0000000});
  EXPECT_NO_THROW(validate(a2a));
}

TEST(DeviceError, DescribesTimeoutsAndPeers) {
  EXPECT_EQ(describeDeviceError(0), "no error");
  EXPECT_EQ(describeDeviceError(kErrorTimeout | (1u << 3)),
            "flag wait timed out (no signal from rank 3)");
  EXPECT_EQ(describeDeviceError(kErrorTimeout | 0b1010u),
            "flag wait timed out (no signal from ranks 1, 3)");
  EXPECT_NE(describeDeviceError(1u << 20).find("unknown bits"), std::string::npos);
}

}  // namespace
}  // namespace xccl::kernels
