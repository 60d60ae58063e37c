// The GPU side's decisions that every rank must take alike (csrc/backend/gpu/gpu_rules.h).
#include "backend/gpu/gpu_rules.h"

#include <gtest/gtest.h>

namespace xccl::backend::rules {
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
        EXPECT_LE(cap, kernels::kDefaultMaxBlocks);
      }
    }
  }
  // 8 ranks on one 132-SM H100: 16 blocks each (the default 32 each would need 256 SMs).
  EXPECT_EQ(sharedGpuMaxBlocks(1, 132, 8), 16);
  // MI300X, 304 CUs, 4 ranks: the default applies, it fits.
  EXPECT_EQ(sharedGpuMaxBlocks(1, 304, 4), kernels::kDefaultMaxBlocks);
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

TEST(AllReduceAlgorithm, MapsThePlansAllReduceKernels) {
  EXPECT_EQ(allReduceAlgorithm(algo::GpuKernel::kOneShotAllReduce), kernels::Algorithm::kOneShot);
  EXPECT_EQ(allReduceAlgorithm(algo::GpuKernel::kTwoShotAllReduce), kernels::Algorithm::kTwoShot);
  EXPECT_THROW(allReduceAlgorithm(algo::GpuKernel::kBroadcast), Error);
}

TEST(OrderBefore, EachRouteFollowsTheOthers) {
  // Kernel after vendor: the comm stream must wait on NCCL's work.
  EXPECT_TRUE(orderBefore(Route::kKernel, false, true).commWaitsVendor);
  EXPECT_FALSE(orderBefore(Route::kKernel, true, false).commWaitsVendor);
  EXPECT_FALSE(orderBefore(Route::kKernel, true, true).currentWaitsKernel);
  // Vendor after kernel: the caller's stream (which NCCL's stream waits on) waits on the kernel.
  EXPECT_TRUE(orderBefore(Route::kVendor, true, false).currentWaitsKernel);
  EXPECT_FALSE(orderBefore(Route::kVendor, false, true).currentWaitsKernel);
  EXPECT_FALSE(orderBefore(Route::kVendor, true, true).commWaitsVendor);
  // Host after either: the caller's stream, which the host copies synchronise, waits on both.
  const OrderSteps host = orderBefore(Route::kHost, true, true);
  EXPECT_TRUE(host.currentWaitsKernel);
  EXPECT_TRUE(host.currentWaitsVendor);
  const OrderSteps idle = orderBefore(Route::kHost, false, false);
  EXPECT_FALSE(idle.currentWaitsKernel || idle.currentWaitsVendor || idle.commWaitsVendor);
}

TEST(DescribeErrorWord, NamesAbortAndPeers) {
  EXPECT_EQ(describeErrorWord(0), "");
  EXPECT_NE(describeErrorWord(kErrorAborted).find("aborted"), std::string::npos);
  const std::string both = describeErrorWord(kErrorAborted | kernels::kErrorTimeout | 2u);
  EXPECT_NE(both.find("aborted"), std::string::npos);
  EXPECT_NE(both.find(kernels::describeDeviceError(kernels::kErrorTimeout | 2u)),
            std::string::npos);
  EXPECT_EQ(describeErrorWord(kernels::kErrorTimeout | 1u),
            kernels::describeDeviceError(kernels::kErrorTimeout | 1u));
}

}  // namespace
}  // namespace xccl::backend::rules
