#include "algo/plan_rows.h"

#include <algorithm>

#include "algo/cpu_plan.h"
#include "algo/gpu_plan.h"
#include "common/error.h"

namespace xccl::algo {
namespace {

std::vector<size_t> defaultSizes() {
  std::vector<size_t> sizes;
  for (size_t s = kKiB; s <= 1024 * kMiB; s *= 4) sizes.push_back(s);
  return sizes;
}

std::string netAlgorithm(Algorithm algorithm, const CpuPlan& plan) {
  std::string name = algorithmName(algorithm);
  if (algorithm == Algorithm::kRing) name += " (" + formatBytes(plan.ringChunkBytes) + " chunks)";
  return name;
}

// The per-rank bytes planCpu wants, from a message in nccl-tests' convention.
size_t perRankBytes(Collective c, size_t bytes, int world) {
  switch (c) {
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kGather:
    case Collective::kScatter: return bytes / static_cast<size_t>(world);
    case Collective::kAllToAll:
    case Collective::kBarrier: return 0;  // their plans do not depend on the size
    default: return bytes;
  }
}

// The shape a group of the query's world and hosts has on CPUs (shared memory assumed).
GroupShape queryShape(const PlanQuery& q) {
  const int perHost = q.worldSize / q.hosts;
  GroupShape shape{q.worldSize};
  if (q.hosts == 1 && q.worldSize > 1) {
    shape.locality = Locality::kOneHost;
    shape.hostRanks = q.worldSize;
  } else if (q.hosts > 1 && perHost > 1) {
    shape.locality = Locality::kPerHost;
    shape.hostRanks = perHost;
  }
  shape.hosts = q.hosts;
  return shape;
}

template <typename Entry>
void markTuned(const Entry* entry, PlanRow& row) {
  if (entry == nullptr) return;
  row.decision = "tuned";
  row.tunedNs = entry->tunedNs;
  row.ruleNs = entry->ruleNs;
}

void cpuRows(const PlanQuery& q, const Tunables& tunables, std::vector<PlanRow>& rows) {
  const GroupShape shape = queryShape(q);
  for (Collective c : kCpuCollectives) {
    const bool sized = c != Collective::kBarrier;
    for (size_t bytes : sized ? q.sizes : std::vector<size_t>{0}) {
      const CpuPlan plan =
          planCpu({c, perRankBytes(c, bytes, q.worldSize)}, shape, tunables, q.tuning);
      PlanRow row{collectiveName(c), bytes, cpuRouteName(plan.route), "", plan.reason};
      markTuned(plan.tuned, row);
      if (plan.route == CpuRoute::kHierarchical && c == Collective::kAllReduce) {
        // The table's hosts are of equal size: slices between hosts, not the leaders' fallback.
        row.algorithm = "in-host reduce_scatter+all_gather, between hosts direct (" +
                        formatBytes(plan.ringChunkBytes) + " chunks)";
      } else if (plan.route == CpuRoute::kHierarchical && c == Collective::kBarrier) {
        row.algorithm = std::string("in-host ") + algorithmName(plan.hostAlgorithm) + ", leaders " +
                        netAlgorithm(plan.algorithm, plan);
      } else if (plan.route == CpuRoute::kHierarchical) {
        // Pipelined between hosts (algo/hierarchical.h): a chain of hosts, or direct exchanges.
        row.algorithm =
            std::string("in-host ") + algorithmName(plan.hostAlgorithm) + ", between hosts " +
            (plan.algorithm == Algorithm::kRing ? "chain" : algorithmName(Algorithm::kDirect));
        if (plan.ringChunkBytes > 0) {
          row.algorithm += " (" + formatBytes(plan.ringChunkBytes) + " chunks)";
        }
      } else {
        row.algorithm = netAlgorithm(plan.algorithm, plan);
      }
      // The shm route's single copy (docs/shm.md): the rows' sizes are whole messages (all_gather:
      // its output), as usesSingleCopy compares them; whether the ranks may read each other is
      // known only when a group probes, hence "where".
      const size_t singleFrom = tunables.shmCmaMinBytes.of(c);
      if (plan.route == CpuRoute::kShm && singleFrom != kNoLimit && bytes >= singleFrom) {
        row.reason += "; single copy (process_vm_readv) from " + formatBytes(singleFrom) +
                      " where the ranks may read each other";
      }
      rows.push_back(std::move(row));
    }
  }
}

void gpuRows(const PlanQuery& q, const topo::Topology& topology, const Tunables& tunables,
             std::vector<PlanRow>& rows) {
  const int perHost = q.worldSize / q.hosts;
  const int gpus = static_cast<int>(topology.gpus.size());
  GpuRequest request;
  request.worldSize = q.worldSize;
  request.hosts = q.hosts;
  request.kernelsVerified = q.kernelsVerified;
  if (gpus > 0) {
    request.ranksPerGpu = (perHost + gpus - 1) / gpus;
    for (int i = 0; i < std::min(perHost, gpus); ++i) request.gpus.push_back(i);
  }
  for (GpuCollective c :
       {GpuCollective::kAllReduce, GpuCollective::kAllGather, GpuCollective::kReduceScatter,
        GpuCollective::kBroadcast, GpuCollective::kReduce, GpuCollective::kAllToAll}) {
    for (size_t bytes : q.sizes) {
      request.collective = c;
      request.bytes = bytes;
      const GpuPlan plan = planGpu(request, topology, tunables, q.tuning);
      PlanRow row{gpuCollectiveName(c), bytes, gpuRouteName(plan.route), plan.name, plan.reason};
      markTuned(plan.tuned, row);
      rows.push_back(std::move(row));
    }
  }
}

}  // namespace

std::vector<PlanRow> planRows(const PlanQuery& query, const topo::Topology& topology,
                              const Tunables& tunables) {
  XCCL_CHECK_ARG(query.worldSize >= 1, "world size must be at least 1, got ", query.worldSize);
  XCCL_CHECK_ARG(query.hosts >= 1 && query.worldSize % query.hosts == 0, "hosts must divide the ",
                 "world size ", query.worldSize, ", got ", query.hosts);
  if (query.tuning != nullptr) {
    const std::string mismatch = tuningMismatch(*query.tuning, queryShape(query));
    XCCL_CHECK_ARG(mismatch.empty(), "the tuning table does not fit this query: ", mismatch);
  }
  PlanQuery q = query;
  if (q.sizes.empty()) q.sizes = defaultSizes();
  std::vector<PlanRow> rows;
  if (q.gpu) {
    gpuRows(q, topology, tunables, rows);
  } else {
    cpuRows(q, tunables, rows);
  }
  return rows;
}

}  // namespace xccl::algo
