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

#include "common/types.h"
#include "net/shm/segment.h"

namespace xccl::algo::shm {

// One-shot all-reduce: every rank copies its input into its slot and reduces all n slots: one
// step, (2 + n) x bytes through each rank's memory. Two-shot: each rank reduces 1/n of the slots
// into its other slot, then copies the n reduced slices: two steps, (4 + 1/n) x bytes. Two-shot
// therefore saves (n - 2 - 1/n) x bytes (nothing for n = 2) for one extra synchronisation, and
// the message size where it starts to pay falls as n grows.
//
// The threshold at 4 ranks, measured with shm_bench (docs/shm.md) on a 2-vCPU AVX-512 VM under
// load from other jobs: two-shot/one-shot time 1.0-1.2 at 1 MiB, 0.86-1.0 at 2 MiB, 0.70-0.86 at
// 4 MiB; at 3 ranks the crossover is ~4 MiB and at 2 ranks there is none (ratios 0.9-1.4 up to
// 16 MiB), which the traffic model (saving(4) / saving(3) = 2.6) reproduces. Waking a peer is
// expensive on an oversubscribed VM; on hosts with a core per rank the crossover is likely lower
// (DeepSpeed's shm all-reduce switches at 1 MiB): re-measure there with shm_bench.
constexpr size_t kTwoShotMinBytes = size_t{2} << 20;

struct Tunables {
  // The two-shot threshold at 4 ranks, scaled for other world sizes by twoShotThreshold().
  // 0: always two-shot; SIZE_MAX: never.
  size_t twoShotMinBytes = kTwoShotMinBytes;

  // twoShotMinBytes from XCCL_SHM_TWO_SHOT_BYTES when set.
  static Tunables fromEnvironment();
};

// The all-reduce/reduce message size (bytes) from which `worldSize` ranks use two-shot:
// twoShotMinBytes x saving(4) / saving(n) with saving(n) = n - 2 - 1/n; SIZE_MAX (never) when
// two-shot saves nothing (n <= 2), unless twoShotMinBytes is 0.
size_t twoShotThreshold(int worldSize, const Tunables& tunables);

struct Context {
  net::shm::Segment& segment;
  uint64_t seq;                // the collective's sequence number (for messages)
  std::string what;            // "allreduce #12", used in every error message
  net::Deadline deadline;
  Tunables tunables;
  net::shm::PeerAlive alive;   // may be empty

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
void reduceScatter(const Context& ctx, const void* input, void* output, size_t count,
                   DataType type, ReduceOp op);

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
