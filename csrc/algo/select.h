// Algorithm selection: a pure function of the request and the tunables, so it can be tested
// over a grid of sizes without any transport. It also picks the transport: a group whose ranks
// share a host has a shared-memory segment, and its collectives run over it (kShm); a group
// spanning hosts with several ranks on some host has a segment per host and runs all_reduce
// hierarchically (kHierarchical); the TCP algorithms (kDirect, kRing) serve everything else and
// whatever an override sends to TCP.
#pragma once

#include <cstddef>
#include <string>

namespace xccl::algo {

enum class Collective {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,  // all_to_all, gather, scatter and barrier have one TCP algorithm each (direct)
  kGather,
  kScatter,
  kBarrier,
};

enum class Algorithm {
  kAuto,    // let select() decide
  kDirect,  // every rank exchanges with every other in one step: fewest hops, most bytes
  kRing,    // chunk-pipelined ring: bandwidth-optimal bytes on the wire, 2(n-1) or n-1 steps
  kShm,     // the shared-memory collectives (algo/shm_collectives.h): ranks on one host only
  // all_reduce across hosts: shared-memory reduce inside each host, TCP all_reduce among one
  // leader per host, shared-memory broadcast inside each host (net/hierarchy.h)
  kHierarchical,
};

// Which shared memory a group has (the backend finds out at group creation).
enum class Locality {
  kNone,     // none: every collective over TCP
  kOneHost,  // every rank on one host: one segment for the group
  kPerHost,  // several hosts, some with several ranks: one segment per such host
};

struct Tunables {
  // At or below this many bytes per rank the latency algorithm wins. Measured on loopback TCP
  // with 2-4 ranks (benchmarks/RESULTS.md): direct exchange beats the ring up to ~64 KiB.
  size_t smallMessageBytes = 64 * 1024;
  // Ring pipelining unit: large enough to amortise a frame and a wake-up, small enough to
  // overlap reduction with transfer (512 KiB was best on loopback TCP).
  size_t ringChunkBytes = 512 * 1024;
  Algorithm forced = Algorithm::kAuto;  // XCCL_ALGO or the group's options

  static Tunables fromEnvironment();
};

// "auto", "direct", "ring", "shm"; throws otherwise (kHierarchical is chosen, never forced).
Algorithm parseAlgorithm(const std::string& name);
const char* algorithmName(Algorithm algorithm);

// `bytes` is the per-rank message size (the input of one rank); it must be the same on every
// rank (for uneven all_gather the largest part), so every rank picks the same algorithm.
// `locality`: the shared memory the group has.
//
// Rules, in order:
// 1. A forced TCP algorithm (XCCL_ALGO=direct|ring or the group's options) is used by every
//    collective that has it (ring: all but all_to_all, gather, scatter, barrier), also where
//    shared memory is available: forcing exists to pin one algorithm.
// 2. On one host (kOneHost), every collective runs over shared memory (kShm). Measured on a
//    2-vCPU VM (docs/shm.md, benchmarks/RESULTS.md), 2 and 4 ranks: shm beat loopback TCP at
//    every size from 8 B to 64 MiB, by 4x (small, 4 ranks on 2 cores) to 100x (small, 2 ranks).
// 3. Across hosts with shared memory per host (kPerHost), all_reduce is kHierarchical: the
//    bytes between hosts are those of an all_reduce among the H leaders, not among all n ranks,
//    and the intra-host phases cost shared-memory copies. Not measured on real multi-host
//    hardware yet (tests simulate hosts on one machine).
// 4. TCP: with one or two ranks, direct for all but all_reduce (a ring step is a direct
//    exchange); otherwise direct up to smallMessageBytes, ring above. all_to_all, gather,
//    scatter and barrier only have direct. Forcing kShm changes nothing where shared memory
//    exists; elsewhere it falls through to these rules.
Algorithm select(Collective collective, size_t bytes, int worldSize, const Tunables& tunables,
                 Locality locality = Locality::kNone);

}  // namespace xccl::algo
