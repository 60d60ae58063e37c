// The real kernel templates run on the CPU (emulator.h: every rank an emulated stream issuing its
// own copy-ins and launches back to back, every GPU thread a std::thread, flags as C++
// acquire/release atomics, seeded random delays), checked bit for bit against the CPU reference.
// Covers what a GPU-less machine can: the barrier and epoch protocol across overlapping
// consecutive calls with changing grids, buffer reuse, the index math with odd counts and
// unaligned pointers, in-place variants, the device-side PREMUL_SUM factor, the timeout path.
// Not covered: the CUDA/HIP primitives themselves and real memory-model behaviour. The same
// sequences run under ThreadSanitizer (test_gpu_emulated_tsan) and against barrier mutants
// (test_emulated_mutants.cc).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu/emulated_collectives.h"
#include "kernels/copy_kernel.cuh"
#include "kernels/reduce_kernels.cuh"
// After the kernels:
#include "gpu/emulator.h"

namespace xccl::kernels {
namespace {

using emulated::Collective;
using emulated::collectiveName;

// A seed per test case, fixed so that a failure reruns with the same inputs and delays.
uint64_t seedOf(int world, Collective c, DataType dtype) {
  return 1000 * static_cast<uint64_t>(world) + 10 * static_cast<uint64_t>(c) +
         static_cast<uint64_t>(dtype) + 1;
}

class EmulatedReduce : public ::testing::TestWithParam<std::tuple<int, Collective, DataType>> {};

// One set of buffers, flags and epochs for the whole sequence: launches with 1 and 3 blocks
// interleave, so per-block epochs advance unevenly and must still agree across ranks; consecutive
// calls overlap across ranks, so a rank reusing its buffer early would corrupt a peer's result.
TEST_P(EmulatedReduce, SequenceMatchesReference) {
  const auto [world, collective, dtype] = GetParam();
  const auto s =
      emulated::coverageSequence(collective, world, dtype, seedOf(world, collective, dtype));
  EXPECT_EQ(emulated::runSequence(s), "");
}

INSTANTIATE_TEST_SUITE_P(
    Emulated, EmulatedReduce,
    ::testing::Combine(
        ::testing::Values(1, 2, 3, 5, 8),
        ::testing::Values(Collective::kOneShot, Collective::kTwoShot, Collective::kReduceScatter),
        ::testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16)),
    [](const auto& info) {
      return "W" + std::to_string(std::get<0>(info.param)) + "_" +
             collectiveName(std::get<1>(info.param)) + "_" + dataTypeName(std::get<2>(info.param));
    });

class EmulatedCopy : public ::testing::TestWithParam<std::tuple<int, Collective>> {};

// all-gather, broadcast (the root moves every call) and all-to-all through pullCopyKernel.
TEST_P(EmulatedCopy, SequenceMatchesReference) {
  const auto [world, collective] = GetParam();
  const auto s = emulated::coverageSequence(collective, world, DataType::kUInt8,
                                            seedOf(world, collective, DataType::kUInt8));
  EXPECT_EQ(emulated::runSequence(s), "");
}

INSTANTIATE_TEST_SUITE_P(Emulated, EmulatedCopy,
                         ::testing::Combine(::testing::Values(1, 2, 3, 8),
                                            ::testing::Values(Collective::kAllGather,
                                                              Collective::kBroadcast,
                                                              Collective::kAllToAll)),
                         [](const auto& info) {
                           return "W" + std::to_string(std::get<0>(info.param)) + "_" +
                                  collectiveName(std::get<1>(info.param));
                         });

// PREMUL_SUM with the factor in device memory, a different factor on every call: each launch must
// read the value its own rank wrote before it in stream order (the host-side factor is NaN).
TEST(EmulatedDeviceFactor, ReadsTheFactorOfEachCall) {
  for (Collective c : {Collective::kOneShot, Collective::kTwoShot, Collective::kReduceScatter}) {
    emulated::Sequence s{c, 3, DataType::kBFloat16, {}, 77};
    const float factors[] = {0.5f, -3.0f, 1.0f, 0.1f};
    for (int k = 0; k < 4; ++k) {
      emulated::Call call{static_cast<size_t>(40 + k), 1 + k % 2};
      call.op = ReduceOp::kPreMulSum;
      call.factor = factors[k];
      call.deviceFactor = true;
      s.calls.push_back(call);
    }
    EXPECT_EQ(emulated::runSequence(s), "");
  }
}

struct CopyRangeParams {
  const char* src;
  char* dst;
  size_t bytes;
  size_t* vectorStores;  // out: 16-byte stores made by the block
  size_t* loadsOutside;  // out: vector loads outside [src, src + bytes)
};

__global__ void copyRangeKernel(CopyRangeParams p) {
  emulation::vectorStores = 0;
  emulation::loadsOutside = 0;
  emulation::loadBegin = p.src;
  emulation::loadEnd = p.src + p.bytes;
  copyRange(p.src, p.dst, p.bytes);
  emulation::loadBegin = nullptr;
  __syncthreads();  // the counters are per thread: sum them in thread order, one at a time
  for (unsigned t = 0; t < blockDim.x; ++t) {
    if (threadIdx.x == t) {
      *p.vectorStores += emulation::vectorStores;
      *p.loadsOutside += emulation::loadsOutside;
    }
    __syncthreads();
  }
}

// copyRange with every (source, destination) misalignment 0..15 and odd lengths: exact bytes,
// nothing written outside the destination, no load outside the source, no misaligned vector, and
// 16-byte stores for all but at most two vectors' worth of head and tail.
TEST(EmulatedCopyRange, EveryMisalignmentAndOddLength) {
  std::vector<char> source(2048 + 64), target(2048 + 64);
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<char>(i * 37 + 11);
  const auto align = [](std::vector<char>& v) {
    const auto p = reinterpret_cast<uintptr_t>(v.data());
    return v.data() + (64 - p % 64) % 64;
  };
  const int misalignedBefore = emulation::misalignedVectorAccesses.load();
  for (int srcMis = 0; srcMis < 16; ++srcMis) {
    for (int dstMis = 0; dstMis < 16; ++dstMis) {
      for (size_t bytes :
           {size_t{0}, size_t{1}, size_t{15}, size_t{17}, size_t{33}, size_t{47}, size_t{1001}}) {
        const char* src = align(source) + 16 + srcMis;
        char* dst = align(target) + 16 + dstMis;
        std::memset(target.data(), 0x5a, target.size());
        size_t stores = 0, outside = 0;
        emulation::launch(&copyRangeKernel, CopyRangeParams{src, dst, bytes, &stores, &outside}, 1,
                          4);
        const std::string what = "src mod 16 = " + std::to_string(srcMis) +
                                 ", dst mod 16 = " + std::to_string(dstMis) + ", " +
                                 std::to_string(bytes) + " bytes";
        ASSERT_EQ(0, std::memcmp(dst, src, bytes)) << what;
        ASSERT_EQ(dst[-1], 0x5a) << what;
        ASSERT_EQ(dst[bytes], 0x5a) << what;
        ASSERT_EQ(outside, 0u) << what;
        // Head < 32 bytes and tail < 32 bytes: the rest goes in 16-byte stores.
        if (bytes >= 64) {
          ASSERT_GE(stores * 16, bytes - 62) << what;
        }
      }
    }
  }
  EXPECT_EQ(emulation::misalignedVectorAccesses.load(), misalignedBefore);
}

// Rank 1 never launches: rank 0's bounded wait records the timeout and the missing peer and
// returns; the next launch on the poisoned handle returns at once, even with a long timeout.
TEST(EmulatedBarrier, MissingPeerTimesOut) {
  std::vector<FlagArea> flags(2);
  std::vector<uint32_t> epochs(2 * kMaxBlocks, 0), errors(2, 0);
  std::vector<float> buffers(2 * 100), outputs(2 * 100);
  const auto launchRank0 = [&](uint64_t timeoutNs) {
    DeviceHandle h{};
    for (int p = 0; p < 2; ++p) {
      h.buffers[p] = &buffers[p * 100];
      h.flags[p] = &flags[p];
    }
    h.epochs = epochs.data();
    h.error = &errors[0];
    h.timeoutNs = timeoutNs;
    h.rank = 0;
    h.worldSize = 2;
    const ReduceParams params{h, outputs.data(), 100, 0, 1, 1, nullptr};
    emulation::runStreams({0}, 3, [&](int) {
      emulation::launch(&directReduceKernel<float, ReduceKind::kSum, 2>, params, 2, 4);
    });
  };
  launchRank0(200ull * 1000 * 1000);
  EXPECT_EQ(errors[0], kErrorTimeout | (1u << 1)) << describeDeviceError(errors[0]);
  EXPECT_EQ(errors[1], 0u);
  const auto start = std::chrono::steady_clock::now();
  launchRank0(60ull * 1000 * 1000 * 1000);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(errors[0], kErrorTimeout | (1u << 1));
}

// Rank 1 never launches and rank 0 waits with a 60 s bound: the host sets kErrorAborted in the
// mapped word (DeviceHandle::hostWord) and the spinning kernel returns within its next polls,
// mirroring what it records into both words; the next launch stops at begin() on the device word.
TEST(EmulatedBarrier, HostAbortStopsSpinningKernel) {
  std::vector<FlagArea> flags(2);
  std::vector<uint32_t> epochs(2 * kMaxBlocks, 0);
  uint32_t deviceWord = 0, hostWord = 0;
  std::vector<float> buffers(2 * 100), outputs(2 * 100);
  DeviceHandle h{};
  for (int p = 0; p < 2; ++p) {
    h.buffers[p] = &buffers[p * 100];
    h.flags[p] = &flags[p];
  }
  h.epochs = epochs.data();
  h.error = &deviceWord;
  h.hostWord = &hostWord;
  h.timeoutNs = 60ull * 1000 * 1000 * 1000;
  h.rank = 0;
  h.worldSize = 2;
  const ReduceParams params{h, outputs.data(), 100, 0, 1, 1, nullptr};
  const auto launchRank0 = [&] {
    emulation::runStreams({0}, 5, [&](int) {
      emulation::launch(&directReduceKernel<float, ReduceKind::kSum, 2>, params, 2, 4);
    });
  };
  const auto start = std::chrono::steady_clock::now();
  std::thread host([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    __atomic_fetch_or(&hostWord, kErrorAborted, __ATOMIC_SEQ_CST);
  });
  launchRank0();
  host.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_NE(deviceWord & (1u << 1), 0u) << describeDeviceError(deviceWord);
  EXPECT_EQ(hostWord & ~kErrorAborted, deviceWord) << "every failure is mirrored to the host";
  EXPECT_NE(describeDeviceError(hostWord).find("aborted"), std::string::npos)
      << describeDeviceError(hostWord);
  const auto again = std::chrono::steady_clock::now();
  launchRank0();
  EXPECT_LT(std::chrono::steady_clock::now() - again, std::chrono::seconds(20));
}

}  // namespace
}  // namespace xccl::kernels
