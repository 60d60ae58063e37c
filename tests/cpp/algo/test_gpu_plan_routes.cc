// planGpu's route rules (gpu_plan.h) as a table: what the group found out at run time and the
// call's context (world size 1, a coalesced batch, no kernel for the operation, kernels that
// cannot fit, CUDA IPC refused, the workspace size, a reduction or a library the vendor lacks).
#include <gtest/gtest.h>

#include <string>

#include "algo/gpu_plan.h"

namespace xccl::algo {
namespace {

// A row's flags: the per-call flags (algo::GpuCallFlag) it flips in a default request, named
// for what the flip means, and the group's part: kKernelsDoNotFit (kernelsFit false),
// kUnverified (kernelsVerified false: every other row plans a verified machine), kTimeSliced.
constexpr unsigned kNone = 0;
constexpr unsigned kUneven = kEvenSplits;
constexpr unsigned kNoVendorReduce = kVendorReduces;
constexpr unsigned kNoVendor = kVendorAvailable;
constexpr unsigned kKernelsDoNotFit = 1u << 8;
constexpr unsigned kUnverified = 1u << 9;
constexpr unsigned kTimeSliced = 1u << 10;

struct Row {
  GpuCollective collective;
  size_t bytes;
  int world;
  int ranksPerGpu;
  unsigned flags;
  // Expected:
  GpuRoute route;
  const char* name;
};

constexpr size_t kWorkspace = kGpuWorkspaceBytes;  // 32 MiB by default

const Row kRows[] = {
    // World size 1 outside a batch: local for the collectives with a kernel (all_to_all only
    // in torch's equal form); the others still go to the vendor library.
    {GpuCollective::kAllReduce, 1 * kMiB, 1, 1, kNone, GpuRoute::kLocal, "local"},
    {GpuCollective::kAllToAll, 1 * kMiB, 1, 1, kNone, GpuRoute::kLocal, "local"},
    {GpuCollective::kAllToAll, 1 * kMiB, 1, 1, kUneven, GpuRoute::kVendor, "nccl"},
    {GpuCollective::kOther, 1 * kMiB, 1, 1, kNone, GpuRoute::kVendor, "nccl"},
    {GpuCollective::kAllReduce, 1 * kMiB, 1, 1, kCoalescing, GpuRoute::kVendor, "nccl"},
    // A coalesced batch is the vendor's, unless the reduction is one it lacks.
    {GpuCollective::kAllReduce, 4 * kKiB, 8, 1, kCoalescing, GpuRoute::kVendor, "nccl"},
    {GpuCollective::kAllReduce, 4 * kKiB, 8, 1, kCoalescing | kNoVendorReduce, GpuRoute::kHost,
     "host"},
    // No kernel for the operation: vendor, or host when ranks share a GPU or the vendor lacks
    // the reduction or the library.
    {GpuCollective::kOther, 4 * kKiB, 8, 1, kNone, GpuRoute::kVendor, "nccl"},
    {GpuCollective::kOther, 4 * kKiB, 8, 2, kNone, GpuRoute::kHost, "host"},
    {GpuCollective::kOther, 4 * kKiB, 8, 1, kNoVendorReduce, GpuRoute::kHost, "host"},
    {GpuCollective::kOther, 4 * kKiB, 8, 1, kNoVendor, GpuRoute::kHost, "host"},
    // The kernel plan, and what takes it away: kernels that cannot all be resident (shared
    // GPUs: host), CUDA IPC refused, a one-launch input past the workspace.
    {GpuCollective::kAllReduce, 4 * kKiB, 8, 1, kNone, GpuRoute::kKernel, "one_shot"},
    {GpuCollective::kAllReduce, 4 * kKiB, 8, 2, kKernelsDoNotFit, GpuRoute::kHost, "host"},
    {GpuCollective::kAllReduce, 4 * kKiB, 8, 1, kIpcRefused, GpuRoute::kVendor, "nccl"},
    {GpuCollective::kAllReduce, 4 * kKiB, 8, 2, kIpcRefused, GpuRoute::kHost, "host"},
    {GpuCollective::kAllToAll, 4 * kKiB, 8, 1, kUneven, GpuRoute::kVendor, "nccl"},
    {GpuCollective::kReduceScatter, kWorkspace, 8, 2, kNone, GpuRoute::kKernel, "all_pairs"},
    {GpuCollective::kReduceScatter, kWorkspace + 1, 8, 2, kNone, GpuRoute::kHost, "host"},
    {GpuCollective::kAllGather, 8 * kWorkspace, 8, 2, kNone, GpuRoute::kKernel, "all_pairs"},
    {GpuCollective::kAllGather, 8 * kWorkspace + 8, 8, 2, kNone, GpuRoute::kHost, "host"},
    // all_reduce and broadcast run in workspace-sized chunks: no workspace limit.
    {GpuCollective::kAllReduce, 4 * kWorkspace, 8, 2, kNone, GpuRoute::kKernel, "two_shot"},
    // A vendor plan the vendor cannot run: host memory.
    {GpuCollective::kAllReduce, 64 * kMiB, 8, 1, kNone, GpuRoute::kVendor, "nccl"},
    {GpuCollective::kAllReduce, 64 * kMiB, 8, 1, kNoVendorReduce, GpuRoute::kHost, "host"},
    {GpuCollective::kAllReduce, 64 * kMiB, 8, 1, kNoVendor, GpuRoute::kHost, "host"},
    {GpuCollective::kAllReduce, 4 * kKiB, 8, 1, kNoVendor, GpuRoute::kKernel, "one_shot"},
    // Kernels not verified on this machine: the vendor, or host memory where it cannot run.
    {GpuCollective::kAllReduce, 4 * kKiB, 8, 1, kUnverified, GpuRoute::kVendor, "nccl"},
    {GpuCollective::kAllGather, 4 * kKiB, 8, 1, kUnverified, GpuRoute::kVendor, "nccl"},
    {GpuCollective::kAllReduce, 4 * kKiB, 8, 2, kUnverified, GpuRoute::kHost, "host"},
    {GpuCollective::kAllReduce, 4 * kKiB, 8, 1, kUnverified | kNoVendor, GpuRoute::kHost, "host"},
    {GpuCollective::kAllReduce, 1 * kMiB, 1, 1, kUnverified, GpuRoute::kLocal, "local"},
    // Ranks time-sliced on a shared GPU (no MPS): host memory; a GPU of its own is not sliced.
    {GpuCollective::kAllReduce, 4 * kKiB, 8, 2, kTimeSliced, GpuRoute::kHost, "host"},
    {GpuCollective::kAllReduce, 4 * kKiB, 8, 1, kTimeSliced, GpuRoute::kKernel, "one_shot"},
};

TEST(GpuPlanRoutes, EveryRow) {
  const topo::Topology h100 =
      topo::loadTopologyFile(std::string(XCCL_TOPO_FIXTURE_DIR) + "/hgx_h100_8x_nvswitch.json");
  const Tunables tunables;
  for (const Row& row : kRows) {
    GpuRequest r;
    r.collective = row.collective;
    r.bytes = row.bytes;
    r.dtype = DataType::kBFloat16;
    r.worldSize = row.world;
    r.ranksPerGpu = row.ranksPerGpu;
    setGpuCallFlags(r, gpuCallFlags(r) ^ (row.flags & 0xff));
    r.kernelsFit = (row.flags & kKernelsDoNotFit) == 0;
    r.kernelsVerified = (row.flags & kUnverified) == 0;
    r.timeSliced = (row.flags & kTimeSliced) != 0;
    const GpuPlan plan = planGpu(r, h100, tunables);
    const std::string where = std::string(gpuCollectiveName(row.collective)) + " " +
                              std::to_string(row.bytes) + " B, world " + std::to_string(row.world) +
                              ", " + std::to_string(row.ranksPerGpu) + " per GPU, flags " +
                              std::to_string(row.flags) + ": " + plan.name + " (" + plan.reason +
                              ")";
    EXPECT_EQ(plan.route, row.route) << where;
    EXPECT_EQ(plan.name, row.name) << where;
    EXPECT_EQ(plan.route == GpuRoute::kKernel, plan.kernel != GpuKernel::kNone) << where;
    EXPECT_FALSE(plan.reason.empty()) << where;
  }
}

// An unverified machine plans no kernel by default and names the reason; XCCL_GPU_ALGO naming a
// kernel runs it anyway (and on a time-sliced shared GPU too: the user asked for it).
TEST(GpuPlanRoutes, UnverifiedKernelsOnlyWhenForced) {
  const topo::Topology h100 =
      topo::loadTopologyFile(std::string(XCCL_TOPO_FIXTURE_DIR) + "/hgx_h100_8x_nvswitch.json");
  GpuRequest r;
  r.bytes = 4 * kKiB;
  r.worldSize = 8;
  GpuPlan plan = planGpu(r, h100, Tunables{});
  EXPECT_EQ(plan.route, GpuRoute::kVendor);
  EXPECT_NE(plan.reason.find("kernels not verified on this machine"), std::string::npos)
      << plan.reason;
  Tunables forced;
  forced.gpuForced = GpuForce::kKernel;
  EXPECT_EQ(planGpu(r, h100, forced).route, GpuRoute::kKernel);
  r.ranksPerGpu = 2;
  r.timeSliced = true;
  plan = planGpu(r, h100, Tunables{});
  EXPECT_EQ(plan.route, GpuRoute::kHost);
  EXPECT_EQ(planGpu(r, h100, forced).route, GpuRoute::kKernel);
  r.kernelsVerified = true;
  plan = planGpu(r, h100, Tunables{});
  EXPECT_EQ(plan.route, GpuRoute::kHost);
  EXPECT_NE(plan.reason.find("without MPS"), std::string::npos) << plan.reason;
  r.timeSliced = false;
  EXPECT_EQ(planGpu(r, h100, Tunables{}).route, GpuRoute::kKernel);
}

// The plan cache's key (backend/gpu/gpu_route_choice.h) holds a request's per-call booleans as
// these bits: every combination must come back as the same request fields.
TEST(GpuPlanRoutes, CallFlagsRoundTrip) {
  for (unsigned flags = 0; flags < 32; ++flags) {
    GpuRequest r;
    setGpuCallFlags(r, static_cast<uint8_t>(flags));
    EXPECT_EQ(gpuCallFlags(r), flags);
    EXPECT_EQ(r.coalescing, (flags & kCoalescing) != 0) << flags;
    EXPECT_EQ(r.vendorAvailable, (flags & kVendorAvailable) != 0) << flags;
  }
}

}  // namespace
}  // namespace xccl::algo
