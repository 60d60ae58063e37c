// The collectives over one host's shared-memory segment (net/shm/segment.h), with the semantics
// and argument conventions of algo/collectives.h: in-place all_reduce, AVG divides by the world
// size, PREMUL_SUM pre-multiplied by the caller (pass SUM), every rank gets bitwise-identical
// reductions (combined in rank order 0..n-1 with reduceMany, so bf16/fp16 accumulate in fp32
// and round once). Messages larger than a slot are pipelined in slot-sized chunks.
//
// Each function is collective: every rank of ctx.segment calls the same sequence of them with
// consistent sizes. Every wait is bounded by ctx.deadline (kTimeout naming the ranks that did not
// arrive) and checks ctx.alive (kPeerFailure naming a dead rank). After any error the segment
// refuses further collectives (kAborted): the group must be torn down.
// Steps and bytes moved: docs/shm.md.
#pragma once

#include <string>
#include <vector>

#include "algo/cpu_plan.h"
#include "common/types.h"
#include "net/shm/segment.h"

namespace xccl::algo::shm {

struct Context {
  net::shm::Segment& segment;
  uint64_t seq;                // the collective's sequence number (for messages)
  std::string what;            // "allreduce #12", used in every error message
  net::Deadline deadline;
  Tunables tunables;
  net::shm::PeerAlive alive;   // may be empty
  // all_reduce and reduce: the plan's kOneShot or kTwoShot (algo/cpu_plan.h), set by
  // algo::Runner. kAuto where a caller runs them without a Runner (tests, benchmarks): planCpu
  // then plans them for this segment's ranks.
  Algorithm algorithm = Algorithm::kAuto;

  int rank() const { return segment.rank(); }
  int size() const { return segment.size(); }
};

// In place on `data` (count elements). `op` may be AVG but not PREMUL_SUM.
void allReduce(const Context& ctx, void* data, size_t count, DataType type, ReduceOp op);

// Root's `data` (bytes) reaches every rank's `data`.
void broadcast(const Context& ctx, void* data, size_t bytes, int root);

// In place; only the root's `data` is defined afterwards (the others' is left unchanged).
void reduce(const Context& ctx, void* data, size_t count, DataType type, ReduceOp op, int root);

// output = concatenation over ranks of each rank's input; rank r's part has bytesPerRank[r]
// bytes. `input` may alias rank's own part of `output`.
void allGather(const Context& ctx, const void* input, void* output,
               const std::vector<size_t>& bytesPerRank);

// input holds size() blocks of `count` elements; output (count elements) receives the
// reduction of block rank() over all ranks.
void reduceScatter(const Context& ctx, const void* input, void* output, size_t count, DataType type,
                   ReduceOp op);

// Rank r sends sendLengths[p] bytes at input + sendOffsets[p] to each p and receives
// recvLengths[p] bytes from p at output + recvOffsets[p].
void allToAll(const Context& ctx, const void* input, const std::vector<size_t>& sendOffsets,
              const std::vector<size_t>& sendLengths, void* output,
              const std::vector<size_t>& recvOffsets, const std::vector<size_t>& recvLengths);

// Root's output receives every rank's input (bytes each) in rank order.
void gather(const Context& ctx, const void* input, size_t bytes, void* output, int root);
// Each rank's output receives block rank() (bytes) of the root's input.
void scatter(const Context& ctx, const void* input, void* output, size_t bytes, int root);

// Returns once every rank has entered.
void barrier(const Context& ctx);

}  // namespace xccl::algo::shm
