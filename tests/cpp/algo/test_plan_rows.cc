// planRows (plan_rows.h): the rows `python -m xccl plan` prints, on fixture machines.
#include <gtest/gtest.h>

#include <string>

#include "algo/plan_rows.h"
#include "threads.h"

namespace xccl::algo {
namespace {

topo::Topology load(const std::string& name) {
  return topo::loadTopologyFile(std::string(XCCL_TOPO_FIXTURE_DIR) + "/" + name);
}

const PlanRow& find(const std::vector<PlanRow>& rows, const std::string& collective, size_t bytes) {
  for (const PlanRow& row : rows) {
    if (row.collective == collective && row.bytes == bytes) return row;
  }
  throw std::runtime_error("no row for " + collective + " " + std::to_string(bytes));
}

TEST(PlanTable, GpuRowsOnAnH100Box) {
  PlanQuery q;
  q.gpu = true;
  q.worldSize = 8;
  q.sizes = {1 * kKiB, 1 * kMiB, 1024 * kMiB};
  q.kernelsVerified = true;
  const std::vector<PlanRow> rows = planRows(q, load("hgx_h100_8x_nvswitch.json"), {});
  EXPECT_EQ(rows.size(), 6u * 3u);  // six collectives, three sizes
  EXPECT_EQ(find(rows, "all_reduce", 1 * kKiB).algorithm, "one_shot");
  EXPECT_EQ(find(rows, "all_reduce", 1 * kKiB).route, "kernel");
  EXPECT_EQ(find(rows, "all_reduce", 1 * kMiB).algorithm, "two_shot");
  EXPECT_EQ(find(rows, "all_reduce", 1024 * kMiB).algorithm, "nccl");
  EXPECT_EQ(find(rows, "all_reduce", 1024 * kMiB).route, "vendor");
  EXPECT_EQ(find(rows, "reduce", 1 * kKiB).algorithm, "nccl");
  EXPECT_NE(find(rows, "all_reduce", 1024 * kMiB).reason.find("8 MiB"), std::string::npos);
}

// The same box with kernels never verified on it: every collective goes to NCCL, saying why.
TEST(PlanTable, GpuRowsOnAnUnverifiedH100BoxAreNccl) {
  PlanQuery q;
  q.gpu = true;
  q.worldSize = 8;
  q.sizes = {1 * kKiB, 1 * kMiB};
  for (const PlanRow& row : planRows(q, load("hgx_h100_8x_nvswitch.json"), {})) {
    EXPECT_EQ(row.route, "vendor") << row.collective << " " << row.bytes;
    EXPECT_EQ(row.algorithm, "nccl") << row.collective << " " << row.bytes;
  }
  const PlanRow small =
      find(planRows(q, load("hgx_h100_8x_nvswitch.json"), {}), "all_reduce", 1 * kKiB);
  EXPECT_NE(small.reason.find("kernels not verified on this machine"), std::string::npos)
      << small.reason;
}

TEST(PlanTable, GpuRowsWithMoreRanksThanGpusShareThem) {
  PlanQuery q;
  q.gpu = true;
  q.worldSize = 4;
  q.sizes = {64 * kMiB};
  // Two L40S under one switch would run kernels; four ranks on four PCIe GPUs go to NCCL.
  const std::vector<PlanRow> four = planRows(q, load("pcie_4x_l40s.json"), {});
  EXPECT_EQ(find(four, "all_reduce", 64 * kMiB).algorithm, "nccl");
  // A VM without GPUs in its topology: no kernel, the vendor library.
  const std::vector<PlanRow> vm = planRows(q, load("cpu_vm.json"), {});
  EXPECT_EQ(find(vm, "all_reduce", 64 * kMiB).route, "vendor");
}

TEST(PlanTable, CpuRowsByLocality) {
  PlanQuery q;
  q.worldSize = 4;
  q.sizes = {1 * kKiB, 16 * kMiB};
  const topo::Topology vm = load("cpu_vm.json");
  const std::vector<PlanRow> oneHost = planRows(q, vm, {});
  EXPECT_EQ(oneHost.size(), 8u * 2u + 1u);  // eight sized collectives and one barrier
  for (const PlanRow& row : oneHost) EXPECT_EQ(row.route, "shm") << row.collective;
  EXPECT_EQ(find(oneHost, "all_reduce", 1 * kKiB).algorithm, "one_shot");
  EXPECT_EQ(find(oneHost, "all_reduce", 16 * kMiB).algorithm, "two_shot");

  q.hosts = 4;  // one rank per host: TCP
  const std::vector<PlanRow> tcp = planRows(q, vm, {});
  EXPECT_EQ(find(tcp, "all_reduce", 1 * kKiB).algorithm, "direct");
  EXPECT_EQ(find(tcp, "all_reduce", 16 * kMiB).algorithm, "ring (512 KiB chunks)");
  EXPECT_EQ(find(tcp, "barrier", 0).route, "tcp");

  q.worldSize = 8;
  q.hosts = 2;  // four ranks on each of two hosts
  const std::vector<PlanRow> both = planRows(q, vm, {});
  EXPECT_EQ(find(both, "all_reduce", 16 * kMiB).route, "hierarchical");
  EXPECT_EQ(find(both, "all_reduce", 16 * kMiB).algorithm,
            "in-host reduce_scatter+all_gather, between hosts direct (512 KiB chunks)");
  EXPECT_EQ(find(both, "all_gather", 16 * kMiB).route, "hierarchical");
  EXPECT_EQ(find(both, "all_gather", 16 * kMiB).algorithm,
            "in-host shm, between hosts direct (512 KiB chunks)");
  EXPECT_EQ(find(both, "broadcast", 1 * kKiB).algorithm,
            "in-host shm, between hosts chain (512 KiB chunks)");
  EXPECT_EQ(find(both, "barrier", 0).algorithm, "in-host shm, leaders direct");
  EXPECT_EQ(find(both, "all_to_all", 16 * kMiB).algorithm, "in-host shm, between hosts direct");
}

TEST(PlanTable, DefaultSizesAndBadQueries) {
  PlanQuery q;
  q.worldSize = 2;
  const std::vector<PlanRow> rows = planRows(q, load("cpu_vm.json"), {});
  EXPECT_EQ(find(rows, "broadcast", 1 * kKiB).route, "shm");
  EXPECT_EQ(find(rows, "broadcast", 1024 * kMiB).route, "shm");
  q.hosts = 3;
  EXPECT_EQ(testing::errorKindOf([&] { planRows(q, load("cpu_vm.json"), {}); }),
            ErrorKind::kInvalidArgument);
  q.hosts = 1;
  q.worldSize = 0;
  EXPECT_EQ(testing::errorKindOf([&] { planRows(q, load("cpu_vm.json"), {}); }),
            ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace xccl::algo
