// The compressed all_reduce behind xccl.hooks (DDP communication hooks): an averaging all_reduce
// of a float32 or float64 buffer whose bytes travel as bfloat16 or float16 (the "wire" type).
//
// Every rank's contribution is rounded to the wire type on its way into the transport (straight
// into its shared-memory slot, or into the front half of its own buffer for the network transport),
// the contributions are summed in fp32 in rank order 0..n-1 and divided by the divisor (the group
// size: DDP averages), and the result is written back into the buffer in place. No buffer of the
// message's size is allocated: the network transport receives into two chunks per peer, shared
// memory uses the slots. Every rank ends with bitwise the same values. Where the average itself
// crosses a transport again (two-shot's reduced slices, the network transport's all-gather, the
// links between hosts) it is rounded to the wire type once more; one-shot keeps the fp32 average.
//
// Steps and bytes moved: docs/algorithms.md ("Compressed all_reduce").
#pragma once

#include <cstddef>
#include <cstdint>

#include "algo/context.h"
#include "algo/runner.h"
#include "algo/shm_collectives.h"
#include "common/types.h"

namespace xccl::algo {

// Where the bytes are compressed.
enum class Compression : uint8_t {
  // Everywhere, as torch's fp16/bf16 compress hooks do: every contribution is rounded to the
  // wire type (on groups spanning hosts, before the exact sum inside each host).
  kEverywhere,
  // Only on links between hosts: the sum inside a host is exact (shared memory, in `type`), the
  // host sums travel compressed between host leaders. A group on one host gets the plain
  // average; a group without shared memory (network transport only) counts every rank as its own
  // host.
  kBetweenHosts,
};

// `type` kFloat32 or kFloat64, `wire` kBFloat16 or kFloat16 (else kInvalidArgument, nothing
// sent). Averages `data` (count elements) over the runner's ranks, in place, the way
// planCpu plans an all_reduce of `count` `type` elements (shared memory, per host, or TCP).
// A one-rank group leaves `data` untouched.
void compressedAllReduce(const Runner& runner, void* data, size_t count, DataType type,
                         DataType wire, Compression where);

// The two transports' algorithms, for the runner above and for tests. Both divide the sum by
// `divisor`. The shared-memory one runs ctx.algorithm's one-shot or two-shot (kAuto: planned
// for the segment).
void compressedAllReduce(const shm::Context& ctx, void* data, size_t count, DataType type,
                         DataType wire, int64_t divisor);
// Over TCP: a direct reduce-scatter of the wire bytes (each rank sums its segment, chunk by
// chunk as the chunks arrive) and an all-gather of the reduced wire segments.
void compressedAllReduce(const Context& ctx, void* data, size_t count, DataType type, DataType wire,
                         int64_t divisor);

}  // namespace xccl::algo
