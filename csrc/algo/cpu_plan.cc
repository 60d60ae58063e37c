#include "algo/cpu_plan.h"

#include <algorithm>
#include <optional>

#include "algo/tuning.h"

namespace xccl::algo {

bool hasRing(Collective collective) {
  return vocab::rowOf(vocab::kCollectiveRows, collective).ring;
}

namespace {

// all_reduce and reduce: one-shot or two-shot over one host's segment (vocabulary.h).
bool isReduction(Collective collective) {
  return vocab::rowOf(vocab::kCollectiveRows, collective).shmReduction;
}

CpuPlan netPlan(Algorithm algorithm, const Tunables& tunables, const char* reason) {
  CpuPlan plan;
  plan.algorithm = algorithm;
  plan.ringChunkBytes = algorithm == Algorithm::kRing ? tunables.ringChunkBytes : 0;
  plan.reason = reason;
  return plan;
}

// Rule 4 of planCpu for `worldSize` ranks over the network transport.
CpuPlan planTcp(Collective collective, size_t bytes, int worldSize, const Tunables& tunables) {
  if (!hasRing(collective)) return netPlan(Algorithm::kDirect, tunables, "its only TCP algorithm");
  if (worldSize <= 2 && collective != Collective::kAllReduce) {
    // With two ranks a ring step is a direct exchange; direct saves the pipelining bookkeeping.
    return netPlan(Algorithm::kDirect, tunables, "at most 2 ranks: a ring step is a direct one");
  }
  // Direct exchange moves (n-1) x bytes per rank instead of ~2 x bytes; it only pays while the
  // step count (latency) dominates, i.e. for small messages.
  return bytes <= tunables.smallMessageBytes
             ? netPlan(Algorithm::kDirect, tunables, "bytes <= XCCL_SMALL_MSG_BYTES (latency)")
             : netPlan(Algorithm::kRing, tunables, "bytes > XCCL_SMALL_MSG_BYTES (bandwidth)");
}

Algorithm shmReduction(size_t bytes, int ranks, const Tunables& tunables) {
  return bytes >= shmTwoShotThreshold(ranks, tunables) ? Algorithm::kTwoShot : Algorithm::kOneShot;
}

// Rule 3 of planCpu.
CpuPlan planHierarchical(const CpuRequest& request, const GroupShape& shape,
                         const Tunables& tunables) {
  const Collective c = request.collective;
  CpuPlan plan;
  if (c == Collective::kAllReduce || c == Collective::kBarrier) {
    // A network collective among the leaders, planned for H ranks: barrier's, and all_reduce's
    // where hosts have different rank counts. On hosts of equal size all_reduce exchanges each
    // local rank's slice directly with its peers on the other hosts, pipelined in ring chunks.
    plan = planTcp(c, request.bytes, shape.hosts, tunables);
    plan.reason = c == Collective::kBarrier
                      ? "hosts with several ranks: shared memory inside, TCP among one leader per "
                        "host"
                      : "hosts with several ranks: shared memory inside, each local rank's slice "
                        "between hosts (uneven hosts: TCP among one leader per host)";
    if (c == Collective::kAllReduce) plan.ringChunkBytes = tunables.ringChunkBytes;
  } else {
    // broadcast and reduce chain the hosts' agents (a ring cut open at the root's host); the
    // others exchange directly between the hosts' agents; all pipelined in ring chunks.
    // all_to_all sends its cross-host messages whole, rank to rank.
    const bool chain = c == Collective::kBroadcast || c == Collective::kReduce;
    plan.algorithm = chain ? Algorithm::kRing : Algorithm::kDirect;
    plan.ringChunkBytes = c == Collective::kAllToAll ? 0 : tunables.ringChunkBytes;
    plan.reason = c == Collective::kAllToAll
                      ? "hosts with several ranks: shared memory inside, rank to rank between hosts"
                      : "hosts with several ranks: shared memory inside, pipelined chunks between "
                        "hosts";
  }
  plan.route = CpuRoute::kHierarchical;
  // The in-host reductions: all_reduce's whole message, reduce's and reduce_scatter's one chunk.
  if (c == Collective::kAllReduce) {
    plan.hostAlgorithm = shmReduction(request.bytes, shape.hostRanks, tunables);
  } else if (c == Collective::kReduce || c == Collective::kReduceScatter) {
    plan.hostAlgorithm =
        shmReduction(std::min(request.bytes, tunables.ringChunkBytes), shape.hostRanks, tunables);
  }
  return plan;
}

// The plan of a tuning entry, or nothing when its route cannot run for a group of `shape`.
std::optional<CpuPlan> tunedPlan(const CpuTuningEntry& e, const CpuRequest& request,
                                 const GroupShape& shape, const Tunables& tunables) {
  Tunables chunked = tunables;
  if (e.ringChunkBytes != 0) chunked.ringChunkBytes = e.ringChunkBytes;
  CpuPlan plan;
  switch (e.route) {
    case CpuRoute::kNet: plan = netPlan(e.algorithm, chunked, ""); break;
    case CpuRoute::kShm:
      if (shape.locality != Locality::kOneHost) return std::nullopt;
      plan.route = CpuRoute::kShm;
      plan.algorithm = e.algorithm;
      break;
    case CpuRoute::kHierarchical: {
      if (shape.locality != Locality::kPerHost) return std::nullopt;
      plan = planHierarchical(request, shape, chunked);
      const Collective c = request.collective;
      const bool shot = e.algorithm == Algorithm::kOneShot || e.algorithm == Algorithm::kTwoShot;
      if (shot && vocab::rowOf(vocab::kCollectiveRows, c).hostReduction) {
        plan.hostAlgorithm = e.algorithm;
      }
      break;
    }
  }
  plan.reason = "tuned: measured fastest at this size on this machine (tuning table)";
  plan.tuned = &e;
  return plan;
}

CpuPlan planByRules(const CpuRequest& request, const GroupShape& shape, const Tunables& tunables) {
  const Collective c = request.collective;
  if (shape.locality == Locality::kOneHost) {
    CpuPlan plan;
    plan.route = CpuRoute::kShm;
    if (isReduction(c)) {
      plan.algorithm = shmReduction(request.bytes, shape.worldSize, tunables);
      plan.reason = plan.algorithm == Algorithm::kTwoShot
                        ? "one host; bytes >= the two-shot threshold for this world size"
                        : "one host; bytes below the two-shot threshold for this world size";
    } else {
      plan.algorithm = Algorithm::kShm;
      plan.reason = "one host: shared memory";
    }
    return plan;
  }
  if (shape.locality == Locality::kPerHost) return planHierarchical(request, shape, tunables);
  return planTcp(c, request.bytes, shape.worldSize, tunables);
}

}  // namespace

CpuPlan planCpu(const CpuRequest& request, const GroupShape& shape, const Tunables& tunables,
                const TuningTable* tuning) {
  const Collective c = request.collective;
  const Algorithm forced = tunables.forced;
  if (forced == Algorithm::kDirect || (forced == Algorithm::kRing && hasRing(c))) {
    return netPlan(forced, tunables, "forced by XCCL_ALGO or the group's options");
  }
  if (tuning != nullptr) {
    if (const CpuTuningEntry* e = findCpu(*tuning, c, request.bytes, shape.worldSize)) {
      if (std::optional<CpuPlan> plan = tunedPlan(*e, request, shape, tunables)) return *plan;
    }
  }
  return planByRules(request, shape, tunables);
}

Algorithm plannedAlgorithm(Algorithm carried, CpuRoute route, Collective collective, size_t bytes,
                           int ranks, const Tunables& tunables) {
  if (carried != Algorithm::kAuto) return carried;
  if (route != CpuRoute::kShm)
    return planCpu({collective, bytes}, GroupShape{ranks}, tunables).algorithm;
  Tunables unforced = tunables;
  unforced.forced = Algorithm::kAuto;
  const GroupShape oneHost{ranks, Locality::kOneHost, 1, ranks};
  return planCpu({collective, bytes}, oneHost, unforced).algorithm;
}

size_t shmTwoShotThreshold(int worldSize, const Tunables& tunables) {
  const size_t base = tunables.shmTwoShotMinBytes;
  if (base == 0) return 0;
  const double saving = worldSize - 2 - 1.0 / worldSize;
  if (saving <= 0 || base == SIZE_MAX) return SIZE_MAX;
  const double scaled = static_cast<double>(base) * (1.75 / saving);  // saving(4) = 1.75
  return scaled >= 1.8e19 ? SIZE_MAX : static_cast<size_t>(scaled);
}

const char* collectiveName(Collective collective) { return vocab::name(collective); }
const char* cpuRouteName(CpuRoute route) { return vocab::name(route); }

}  // namespace xccl::algo
