// The GPU decisions the backend applies per group and per call, made by the planner
// (algo/gpu_plan.h): the grid cap when ranks share a GPU, and when all_to_all_single may run the
// kernel. Every rank must reach the same answer from what all ranks know alike.
#include <gtest/gtest.h>

#include <vector>

#include "algo/gpu_plan.h"

namespace xccl::algo {
namespace {

TEST(ResidentBlocksPerSm, AssumesTheRegistersLaunchBoundsAllow) {
  // H100/H200: 2048 threads, 64 Ki registers per SM and per block. 512 threads may use 128
  // registers each, which fills the SM with one block.
  EXPECT_EQ(residentBlocksPerSm(512, 2048, 65536, 65536), 1);
  // 256 threads may use 255 registers each: still one block (65536 / (256 * 255) = 1).
  EXPECT_EQ(residentBlocksPerSm(256, 2048, 65536, 65536), 1);
  // 128 threads at most 255 registers: two blocks by registers, 16 by threads.
  EXPECT_EQ(residentBlocksPerSm(128, 2048, 65536, 65536), 2);
  // Thread-limited SMs (e.g. 1024 threads per SM) never report more than threads allow.
  EXPECT_EQ(residentBlocksPerSm(64, 1024, 1 << 20, 65536), 16);
  // Never 0: a kernel that launches has one block per SM.
  EXPECT_EQ(residentBlocksPerSm(1024, 512, 65536, 65536), 1);
}

TEST(SharedGpuMaxBlocks, NoCapWithOneRankPerGpu) {
  EXPECT_EQ(sharedGpuMaxBlocks(1, 132, 1), kNoCap);
  EXPECT_EQ(sharedGpuMaxBlocks(1, 132, 0), kNoCap);
}

TEST(SharedGpuMaxBlocks, AllColocatedBlocksFit) {
  for (int sms : {1, 7, 80, 108, 132, 304}) {
    for (int perSm : {1, 2, 4}) {
      for (int ranks = 2; ranks <= 8; ++ranks) {
        const int cap = sharedGpuMaxBlocks(perSm, sms, ranks);
        if (perSm * sms < ranks) {
          EXPECT_EQ(cap, kCannotFit) << sms << " SMs, " << ranks << " ranks";
          continue;
        }
        ASSERT_GE(cap, 1);
        EXPECT_LE(cap * ranks, perSm * sms) << sms << " SMs x " << perSm << ", " << ranks;
        EXPECT_LE(cap, kGpuDefaultMaxBlocks);
      }
    }
  }
  // 8 ranks on one 132-SM H100: 16 blocks each (the default 32 each would need 256 SMs).
  EXPECT_EQ(sharedGpuMaxBlocks(1, 132, 8), 16);
  // MI300X, 304 CUs, 4 ranks: the default applies, it fits.
  EXPECT_EQ(sharedGpuMaxBlocks(1, 304, 4), kGpuDefaultMaxBlocks);
}

TEST(KernelAllToAll, OnlyTorchsEqualFormRunsTheKernel) {
  const std::vector<int64_t> none;
  const std::vector<int64_t> equal{2, 2, 2, 2};
  EXPECT_TRUE(kernelAllToAll(8, 32, 8, 32, none, none, 4));
  // Explicit lists never run the kernel, equal or not: a peer's lists may differ (MoE), and a
  // rank deciding from its own equal lists would leave its peers on NCCL's route (deadlock).
  EXPECT_FALSE(kernelAllToAll(8, 32, 8, 32, equal, equal, 4));
  EXPECT_FALSE(kernelAllToAll(8, 32, 8, 32, equal, none, 4));
  EXPECT_FALSE(kernelAllToAll(8, 32, 8, 32, none, equal, 4));
  EXPECT_FALSE(kernelAllToAll(8, 32, 8, 32, {1, 3, 2, 2}, {2, 2, 2, 2}, 4));
}

TEST(KernelAllToAll, ShapesThatDoNotDivide) {
  const std::vector<int64_t> none;
  EXPECT_FALSE(kernelAllToAll(6, 24, 6, 24, none, none, 4));  // rows not divisible
  EXPECT_FALSE(kernelAllToAll(8, 32, 4, 16, none, none, 4));  // sizes differ
  EXPECT_FALSE(kernelAllToAll(8, 32, 8, 32, none, none, 0));
  EXPECT_TRUE(kernelAllToAll(0, 0, 0, 0, none, none, 3));  // nothing to send: equal chunks
}

}  // namespace
}  // namespace xccl::algo
