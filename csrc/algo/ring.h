// The chunk-pipelined ring executor shared by all_reduce, all_gather and reduce_scatter.
//
// A ring algorithm is a list of steps; at each step a rank sends one segment of its buffer to
// its right neighbour and receives one from its left neighbour, optionally reducing it into
// its own copy. Each segment travels in chunks, and a chunk received at step t is forwarded at
// step t+1 as soon as it is reduced, so transfer and reduction overlap.
#pragma once

#include <cstdint>
#include <vector>

#include "algo/context.h"
#include "common/types.h"

namespace xccl::algo {

// Byte ranges of a buffer cut into segments.
struct Segments {
  std::vector<size_t> offset;
  std::vector<size_t> length;

  // `count` elements of `elementSize` bytes split into `parts` ranges whose element counts
  // differ by at most one.
  static Segments even(size_t count, size_t elementSize, int parts);
  // Consecutive ranges of the given byte lengths.
  static Segments of(const std::vector<size_t>& lengths);
  size_t maxLength() const;
};

struct RingStep {
  int sendSegment;
  int recvSegment;
  bool reduce;  // reduce the received segment into ours (else overwrite ours with it)
};

// Requires steps[t + 1].sendSegment == steps[t].recvSegment (what a ring does).
// `type`/`combiner` are used by reducing steps only.
void runRing(const Context& ctx, uint8_t* data, const Segments& segments,
             const std::vector<RingStep>& steps, DataType type, ReduceOp combiner);

// The reduce-scatter half of a ring: after it, segment (rank + 1 + shift) mod n of `data`
// holds the full reduction. The first step sends segment (rank + shift).
std::vector<RingStep> ringReduceSteps(int rank, int size, int shift);
// The all-gather half: the first step sends segment (rank + shift), which must be complete.
std::vector<RingStep> ringGatherSteps(int rank, int size, int shift);

}  // namespace xccl::algo
