// The real kernel templates run on the CPU (emulation/kernels/*: every GPU thread a std::thread,
// flags as C++ acquire/release atomics), checked bit for bit against the CPU reference. Covers
// what a GPU-less machine can: the barrier and epoch protocol across launches with changing
// grids, the index math with odd counts and unaligned pointers, in-place variants, the timeout
// path. Not covered: the CUDA/HIP primitives themselves and real memory-model behaviour.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu/reference.h"
#include "kernels/copy_kernel.cuh"
#include "kernels/reduce_kernels.cuh"
// After the kernels:
#include "gpu/emulator.h"

namespace xccl::kernels {
namespace {

using testing::Bytes;
// Threads per emulated block: at least the world size (thread t < W owns the flag pair with
// peer t), otherwise few, since every one is an OS thread.
int threadsFor(int world) { return std::max(world, 4); }

// Host memory standing in for every rank's device memory, 64-byte aligned plus an offset.
class EmulatedRanks {
 public:
  EmulatedRanks(int world, size_t bytes) : world_(world), flags_(world), errors_(world) {
    epochs_.assign(static_cast<size_t>(world) * kMaxBlocks, 0);
    for (int r = 0; r < world; ++r) {
      buffers_.emplace_back(bytes + 64);
      outputs_.emplace_back(bytes + 64);
    }
  }
  int world() const { return world_; }
  char* buffer(int r) { return aligned(buffers_[r]); }
  char* output(int r) { return aligned(outputs_[r]); }
  uint32_t error(int r) const { return errors_[r]; }

  DeviceHandle handle(int rank, size_t offset = 0, uint64_t timeoutNs = kDefaultTimeoutNs) {
    DeviceHandle h{};
    for (int p = 0; p < world_; ++p) {
      h.buffers[p] = buffer(p) + offset;
      h.flags[p] = &flags_[p];
    }
    h.epochs = &epochs_[static_cast<size_t>(rank) * kMaxBlocks];
    h.error = &errors_[rank];
    h.timeoutNs = timeoutNs;
    h.rank = rank;
    h.worldSize = world_;
    return h;
  }

 private:
  static char* aligned(std::vector<char>& v) {
    const auto p = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + ((64 - p % 64) % 64);
  }
  int world_;
  std::vector<std::vector<char>> buffers_, outputs_;
  std::vector<FlagArea> flags_;
  std::vector<uint32_t> epochs_;
  std::vector<uint32_t> errors_;
};

// Calls fn(T{}, kind constant, world constant) for a runtime (dtype, kind, world).
template <typename Fn>
void dispatch(DataType dtype, ReduceKind kind, int world, Fn&& fn) {
  auto withWorld = [&](auto t, auto k) {
    switch (world) {
      case 1: return fn(t, k, std::integral_constant<int, 1>{});
      case 2: return fn(t, k, std::integral_constant<int, 2>{});
      case 3: return fn(t, k, std::integral_constant<int, 3>{});
      case 5: return fn(t, k, std::integral_constant<int, 5>{});
      case 8: return fn(t, k, std::integral_constant<int, 8>{});
    }
    FAIL() << "world " << world << " not instantiated";
  };
  auto withKind = [&](auto t) {
    switch (kind) {
      case ReduceKind::kSum:
        return withWorld(t, std::integral_constant<ReduceKind, ReduceKind::kSum>{});
      case ReduceKind::kMin:
        return withWorld(t, std::integral_constant<ReduceKind, ReduceKind::kMin>{});
      case ReduceKind::kMax:
        return withWorld(t, std::integral_constant<ReduceKind, ReduceKind::kMax>{});
    }
  };
  switch (dtype) {
    case DataType::kFloat32: return withKind(float{});
    case DataType::kFloat16: return withKind(Half{});
    default: return withKind(BFloat16{});
  }
}

enum class Kind { kOneShot, kTwoShot, kReduceScatter };

// One reduce collective on all ranks; offsets in elements; checks every rank's result.
void checkReduce(EmulatedRanks& e, Kind kind, DataType dtype, ReduceOp op, size_t count,
                 int blocks, size_t inOffset = 0, size_t outOffset = 0, bool inPlace = false,
                 uint64_t seed = 1) {
  const int world = e.world();
  const size_t size = elementSize(dtype);
  const size_t perRank = kind == Kind::kReduceScatter ? count * world : count;
  std::vector<Bytes> inputs;
  for (int p = 0; p < world; ++p) {
    inputs.push_back(testing::randomElements(dtype, perRank, seed * 97 + p));
    std::memcpy(e.buffer(p) + inOffset * size, inputs[p].data(), inputs[p].size());
  }
  const float factor = 0.37f;
  const ReduceSpec spec = reduceSpec(dtype, op, factor, world);
  std::vector<ReduceParams> params;
  for (int r = 0; r < world; ++r) {
    ReduceParams p{e.handle(r, inOffset * size), e.output(r) + outOffset * size, count, 0,
                   spec.preMul, spec.postDiv};
    if (kind == Kind::kReduceScatter) p.srcOffset = static_cast<size_t>(r) * count;
    if (inPlace) {
      p.output = kind == Kind::kReduceScatter
                     ? static_cast<char*>(p.handle.buffers[r]) + r * count * size
                     : p.handle.buffers[r];
    }
    params.push_back(p);
  }
  dispatch(dtype, spec.kind, world, [&](auto t, auto k, auto w) {
    using T = decltype(t);
    constexpr ReduceKind K = decltype(k)::value;
    constexpr int W = decltype(w)::value;
    emulation::runGrid(kind == Kind::kTwoShot ? &twoShotKernel<T, K, W>
                                              : &directReduceKernel<T, K, W>,
                       params, blocks, threadsFor(world));
  });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(e.error(r), 0u) << describeDeviceError(e.error(r));
    const size_t offset = kind == Kind::kReduceScatter ? r * count : 0;
    const Bytes expected = testing::referenceReduce(dtype, op, factor, inputs, offset, count);
    const char* out = static_cast<const char*>(params[r].output);
    ASSERT_EQ(testing::firstMismatch(dtype, expected, Bytes(out, out + count * size)), "")
        << dataTypeName(dtype) << " " << reduceOpName(op) << " count " << count << " world "
        << world << " rank " << r << " blocks " << blocks << " offsets " << inOffset << "/"
        << outOffset << (inPlace ? " in place" : "");
  }
  ASSERT_EQ(emulation::misalignedVectorAccesses.load(), 0);
}

class EmulatedReduce
    : public ::testing::TestWithParam<std::tuple<int, Kind, DataType>> {};

// One handle for the whole sequence: launches with 1 and 3 blocks interleave, so per-block
// epochs advance unevenly and must still agree across ranks.
TEST_P(EmulatedReduce, MatchesReferenceAcrossGridsOffsetsAndOps) {
  const auto [world, kind, dtype] = GetParam();
  EmulatedRanks e(world, 8 * 300 * 4);
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kPreMulSum, ReduceOp::kMin,
                          ReduceOp::kMax};
  uint64_t seed = 1;
  int opIndex = 0;
  for (size_t count : {size_t{1}, size_t{7}, size_t{33}, size_t{257}}) {
    for (int blocks : {1, 3}) {
      for (auto [in, out] : {std::pair<size_t, size_t>{0, 0}, {1, 1}, {1, 0}}) {
        const ReduceOp op = ops[opIndex++ % 5];
        checkReduce(e, kind, dtype, op, count, blocks, in, out, false, seed++);
      }
      if (kind != Kind::kOneShot) {
        checkReduce(e, kind, dtype, ReduceOp::kSum, count, blocks, 1, 0, true, seed++);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, EmulatedReduce,
    ::testing::Combine(::testing::Values(1, 2, 3, 5, 8),
                       ::testing::Values(Kind::kOneShot, Kind::kTwoShot, Kind::kReduceScatter),
                       ::testing::Values(DataType::kFloat32, DataType::kFloat16,
                                         DataType::kBFloat16)),
    [](const auto& info) {
      const Kind kind = std::get<1>(info.param);
      return "W" + std::to_string(std::get<0>(info.param)) +
             (kind == Kind::kOneShot ? "_OneShot_"
                                     : kind == Kind::kTwoShot ? "_TwoShot_" : "_ReduceScatter_") +
             dataTypeName(std::get<2>(info.param));
    });

// all-gather, broadcast and all-to-all through pullCopyKernel, with byte counts that leave heads
// and tails, several parts per source and grids smaller and larger than the number of sources.
TEST(EmulatedCopy, AllGatherBroadcastAllToAll) {
  for (int world : {1, 2, 3, 8}) {
    EmulatedRanks e(world, 8 * 1000 + 64);
    uint64_t seed = 5;
    for (size_t chunk : {size_t{1}, size_t{17}, size_t{1000}}) {
      for (size_t offset : {size_t{0}, size_t{3}}) {
        for (int parts : {1, 2}) {
          for (int blocks : {1, world + 1}) {
            std::vector<Bytes> inputs;
            for (int p = 0; p < world; ++p) {
              // Random bytes: the copy kernel does not care what they encode.
              inputs.push_back(
                  testing::randomElements(DataType::kFloat32, (chunk * world + 3) / 4, seed++));
              inputs[p].resize(chunk * world);
              std::memcpy(e.buffer(p) + offset, inputs[p].data(), chunk * world);
            }
            const auto run = [&](size_t srcStride, int sources, int root, bool gather) {
              std::vector<CopyParams> params;
              for (int r = 0; r < world; ++r) {
                params.push_back(CopyParams{e.handle(r, offset), e.output(r), chunk,
                                            srcStride * r, sources, root, parts, gather});
              }
              emulation::runGrid(&pullCopyKernel, params, blocks, threadsFor(world));
              for (int r = 0; r < world; ++r) ASSERT_EQ(e.error(r), 0u);
            };
            const std::string what = "world " + std::to_string(world) + " chunk " +
                                     std::to_string(chunk) + " offset " + std::to_string(offset) +
                                     " parts " + std::to_string(parts) + " blocks " +
                                     std::to_string(blocks);
            run(0, world, 0, true);  // all-gather
            for (int r = 0; r < world; ++r) {
              for (int p = 0; p < world; ++p) {
                ASSERT_EQ(0, std::memcmp(e.output(r) + p * chunk, inputs[p].data(), chunk))
                    << "all-gather " << what << " rank " << r << " from " << p;
              }
            }
            const int root = world - 1;
            run(0, 1, root, false);  // broadcast
            for (int r = 0; r < world; ++r) {
              ASSERT_EQ(0, std::memcmp(e.output(r), inputs[root].data(), chunk))
                  << "broadcast " << what << " rank " << r;
            }
            run(chunk, world, 0, true);  // all-to-all: source offset rank * chunk
            for (int r = 0; r < world; ++r) {
              for (int p = 0; p < world; ++p) {
                ASSERT_EQ(0, std::memcmp(e.output(r) + p * chunk, inputs[p].data() + r * chunk,
                                         chunk))
                    << "all-to-all " << what << " rank " << r << " from " << p;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(emulation::misalignedVectorAccesses.load(), 0);
}

// Rank 1 never launches: rank 0's bounded wait records the timeout and the missing peer and
// returns; the next launch on the poisoned handle returns at once, even with a long timeout.
TEST(EmulatedBarrier, MissingPeerTimesOut) {
  EmulatedRanks e(2, 4096);
  const auto launchRank0 = [&](uint64_t timeoutNs) {
    std::vector<ReduceParams> params;
    for (int r = 0; r < 2; ++r) {
      params.push_back(ReduceParams{e.handle(r, 0, timeoutNs), e.output(r), 100, 0, 1, 1});
    }
    emulation::runGrid(&directReduceKernel<float, ReduceKind::kSum, 2>, params, 2,
                       threadsFor(2), {0});
  };
  launchRank0(200ull * 1000 * 1000);
  EXPECT_EQ(e.error(0), kErrorTimeout | (1u << 1)) << describeDeviceError(e.error(0));
  EXPECT_EQ(e.error(1), 0u);
  const auto start = std::chrono::steady_clock::now();
  launchRank0(60ull * 1000 * 1000 * 1000);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(e.error(0), kErrorTimeout | (1u << 1));
}

}  // namespace
}  // namespace xccl::kernels
