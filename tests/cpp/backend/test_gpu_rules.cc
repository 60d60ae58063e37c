// The GPU side's decisions that every rank must take alike (csrc/backend/gpu/gpu_rules.h); the
// grid cap and the all_to_all kernel rule are the planner's (tests/cpp/algo/test_gpu_grid.cc).
#include "backend/gpu/gpu_rules.h"

#include <gtest/gtest.h>

namespace xccl::backend::rules {
namespace {

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
