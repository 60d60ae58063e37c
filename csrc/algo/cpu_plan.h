// Selection on CPUs: the one place that decides how a collective on host memory runs. A pure
// function of (request, the group's shape, tunables) -> plan, so it can be tested over a grid of
// sizes without any transport (tests/cpp/algo/test_cpu_plan.cc). The plan names the transport
// (route), the algorithm and its chunking; the executors (algo::Runner, the network collectives of
// collectives.h, the shared-memory ones of shm_collectives.h) run what it says.
//
// Routes: a group whose ranks share a host has a shared-memory segment, and its collectives run
// over it (kShm); a group spanning hosts with several ranks on some host has a segment per host
// and runs every collective hierarchically (kHierarchical, algo/hierarchical.h); the network
// transport serves everything else and whatever an override sends to the network transport. Rules
// and measurements: docs/algorithms.md
// ("Selection on CPUs").
#pragma once

#include <cstddef>

#include "algo/tunables.h"

namespace xccl::algo {

struct CpuTuningEntry;
struct TuningTable;

// The collectives, routes and localities, with their names and legal combinations:
// common/vocabulary.h.
using vocab::Collective;
using vocab::CpuRoute;
using vocab::Locality;

// Every collective, in the enum's order (tables and tests iterate over it).
inline constexpr Collective kCpuCollectives[] = {Collective::kAllReduce,     Collective::kAllGather,
                                                 Collective::kReduceScatter, Collective::kBroadcast,
                                                 Collective::kReduce,        Collective::kAllToAll,
                                                 Collective::kGather,        Collective::kScatter,
                                                 Collective::kBarrier};

// Whether the network transport has a ring for `collective` (vocabulary.h's CollectiveRow::ring):
// all but all_to_all, gather, scatter and barrier, which only have direct.
bool hasRing(Collective collective);

struct CpuRequest {
  Collective collective = Collective::kAllReduce;
  // The per-rank message size (the input of one rank); it must be the same on every rank (for
  // uneven all_gather the largest part), so every rank plans alike.
  size_t bytes = 0;
};

// What planning needs to know of the group; the same on every rank but hostRanks, which is the
// same on every rank of one host (only the in-host phases of kHierarchical depend on it).
struct GroupShape {
  int worldSize = 1;
  Locality locality = Locality::kNone;
  int hosts = 1;  // kPerHost: hosts the group spans (the network leaders of kHierarchical)
  int hostRanks = 1;  // ranks sharing this rank's segment (kOneHost: worldSize)
};

struct CpuPlan {
  CpuRoute route = CpuRoute::kNet;
  // kNet: kDirect or kRing. kShm: kOneShot or kTwoShot for all_reduce and reduce, kShm for the
  // others. kHierarchical: the network pattern among the hosts' agents: barrier's network algorithm
  // among the leaders, and all_reduce's where hosts differ in size (on hosts of equal size its
  // slices travel directly between ranks), kRing for broadcast's and reduce's chain, kDirect for
  // the others.
  Algorithm algorithm = Algorithm::kDirect;
  // kHierarchical: the in-host reduce's kOneShot or kTwoShot for reduce, reduce_scatter and
  // all_reduce through the leaders (hosts of different sizes); kShm for the others.
  Algorithm hostAlgorithm = Algorithm::kShm;
  // The pipelining unit where a ring runs, and of kHierarchical but all_to_all and barrier
  // (XCCL_RING_CHUNK_BYTES); 0 otherwise.
  size_t ringChunkBytes = 0;
  // The rule that decided, in words (a literal: planning builds no string per call).
  const char* reason = "";
  // The tuning table's entry that decided (its measured numbers for plan rows); null: the rules.
  const CpuTuningEntry* tuned = nullptr;
};

// Rules, in order:
// 1. A forced network algorithm (XCCL_ALGO=direct|ring or the group's options) is used by every
//    collective that has it (ring: all but all_to_all, gather, scatter, barrier), also where
//    shared memory is available: forcing exists to pin one algorithm.
// 2. On one host (kOneHost), every collective runs over shared memory (kShm); all_reduce and
//    reduce two-shot from shmTwoShotThreshold(worldSize) bytes, one-shot below. Measured on a
//    2-vCPU VM (docs/shm.md, benchmarks/RESULTS.md), 2 and 4 ranks: shm beat loopback TCP at
//    every size from 8 B to 64 MiB, by 4x (small, 4 ranks on 2 cores) to 100x (small, 2 ranks).
// 3. Across hosts with shared memory per host (kPerHost), every collective is kHierarchical at
//    every size: no byte between two ranks of one host crosses the network, and what crosses it
//    travels once per host rather than once per rank (all pipelined in ring chunks, see
//    algo/hierarchical.h; all_reduce on hosts of different sizes: an all_reduce among the H
//    leaders, planned by rule 4 for H ranks). Chosen for the bytes between hosts: with
//    simulated hosts over loopback (docs/network.md) flat TCP still wins small broadcasts and
//    all_to_all, where the "network" costs what shared memory does; not measured on real
//    multi-host hardware yet.
// 4. The network transport: with one or two ranks, direct for all but all_reduce (a ring step is a
// direct
//    exchange); otherwise direct up to smallMessageBytes, ring above. all_to_all, gather,
//    scatter and barrier only have direct. Forcing kShm changes nothing where shared memory
//    exists; elsewhere it falls through to these rules.
// A measured tuning table (algo/tuning.h; the caller passes only one made for this group's shape)
// comes between rule 1 and the others: the entry covering the request decides where its route
// can run here (tcp always, shm only on one host, hierarchical only with segments per host),
// and its ring chunk replaces Tunables::ringChunkBytes; requests it does not cover, or whose
// entry's route cannot run here, follow the rules.
CpuPlan planCpu(const CpuRequest& request, const GroupShape& shape, const Tunables& tunables,
                const TuningTable* tuning = nullptr);

// The algorithm a context carries into an executor: `carried` when the caller planned the call
// (algo::Runner sets it from planCpu's plan), else (Algorithm::kAuto: tests and benchmarks that
// call an algorithm directly, the all_gather inside the compressed all_reduce) the one planCpu
// gives `collective` of `bytes` per rank over `route` among `ranks` ranks. Over kShm a call is
// planned as on one host whatever XCCL_ALGO forces: it runs over the segment anyway. The one
// place executors get an algorithm from: they never plan themselves.
Algorithm plannedAlgorithm(Algorithm carried, CpuRoute route, Collective collective, size_t bytes,
                           int ranks, const Tunables& tunables);

// The all-reduce/reduce message size (bytes) from which `worldSize` ranks use two-shot over
// shared memory: shmTwoShotMinBytes x saving(4) / saving(n) with saving(n) = n - 2 - 1/n;
// SIZE_MAX (never) when two-shot saves nothing (n <= 2), unless shmTwoShotMinBytes is 0.
size_t shmTwoShotThreshold(int worldSize, const Tunables& tunables);

const char* collectiveName(Collective collective);
const char* cpuRouteName(CpuRoute route);

}  // namespace xccl::algo
