// Algorithm selection: a pure function of the request and the tunables, so it can be tested
// over a grid of sizes without any transport.
#pragma once

#include <cstddef>
#include <string>

namespace xccl::algo {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce };

enum class Algorithm {
  kAuto,    // let select() decide
  kDirect,  // every rank exchanges with every other in one step: fewest hops, most bytes
  kRing,    // chunk-pipelined ring: bandwidth-optimal bytes on the wire, 2(n-1) or n-1 steps
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

Algorithm parseAlgorithm(const std::string& name);  // "auto", "direct", "ring"; throws otherwise
const char* algorithmName(Algorithm algorithm);

// `bytes` is the per-rank message size (the input of one rank).
Algorithm select(Collective collective, size_t bytes, int worldSize, const Tunables& tunables);

}  // namespace xccl::algo
