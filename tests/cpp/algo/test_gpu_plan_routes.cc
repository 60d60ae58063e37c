// planGpu's route rules (gpu_plan.h) as a table: what the group found out at run time and the
// call's context (world size 1, a coalesced batch, no kernel for the operation, kernels that
// cannot fit, CUDA IPC refused, the workspace size, a reduction or a library the vendor lacks).
#include <gtest/gtest.h>

#include <string>

#include "algo/gpu_plan.h"

namespace xccl::algo {
namespace {

// A row's flags: the per-call flags (algo::GpuCallFlag) it flips in a default request, named
// for what the flip means, and kKernelsDoNotFit (the group's kernelsFit, false).
constexpr unsigned kNone = 0;
constexpr unsigned kUneven = kEvenSplits;
constexpr unsigned kNoVendorReduce = kVendorReduces;
constexpr unsigned kNoVendor = kVendorAvailable;
constexpr unsigned kKernelsDoNotFit = 1u << 8;

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

// The plan cache's key (backend/gpu/gpu_path.h) holds a request's per-call booleans as these
// bits: every combination must come back as the same request fields.
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
