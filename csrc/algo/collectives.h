// The collectives over any Transport. Buffers are host memory; sizes are validated by the
// caller (the backend) before any of these is called, so every rank passes consistent sizes.
// Each function is collective: every rank of ctx.transport calls it with the same ctx.seq.
// Steps and bytes on the wire of each algorithm: docs/algorithms.md.
#pragma once

#include <vector>

#include "algo/context.h"
#include "common/types.h"

namespace xccl::algo {

// In place on `data` (count elements). `op` may be AVG (divides by the world size) but not
// PREMUL_SUM: the caller pre-multiplies its input and passes SUM.
void allReduce(const Context& ctx, void* data, size_t count, DataType type, ReduceOp op);

// Root's `data` (bytes) reaches every rank's `data`.
void broadcast(const Context& ctx, void* data, size_t bytes, int root);

// In place; only the root's `data` is defined afterwards (others' may be clobbered as scratch).
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

// Returns once every rank has entered (dissemination: ceil(log2 n) rounds of empty messages).
void barrier(const Context& ctx);

}  // namespace xccl::algo
