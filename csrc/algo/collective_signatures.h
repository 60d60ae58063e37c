// The collectives' signatures, written once for the three ways of running them, each a set of
// free functions overloaded on its context type:
//  - algo/collectives.h:     over any Transport (algo::Context);
//  - algo/shm_collectives.h: over one host's shared-memory segment (algo::shm::Context);
//  - algo/runner.h:          per call the way planCpu plans it (algo::Runner).
// One list keeps the three interchangeable (the backend's collective bodies and the tests call
// any of them alike) and their semantics one: where a transport differs, its header says.
//
// Each function is collective: every rank calls the same sequence of them with consistent sizes
// (the caller validates them). Buffers are host memory.
//  - allReduce: in place on `data` (count elements). `op` may be AVG (divides by the world size)
//    but not PREMUL_SUM: the caller pre-multiplies its input and passes SUM.
//  - broadcast: root's `data` (bytes) reaches every rank's `data`.
//  - reduce: in place; only the root's `data` is defined afterwards.
//  - allGather: output = concatenation over ranks of each rank's input; rank r's part has
//    bytesPerRank[r] bytes. `input` may alias rank's own part of `output`.
//  - reduceScatter: input holds size() blocks of `count` elements; output (count elements)
//    receives the reduction of block rank() over all ranks.
//  - allToAll: rank r sends sendLengths[p] bytes at input + sendOffsets[p] to each p and receives
//    recvLengths[p] bytes from p at output + recvOffsets[p].
//  - gather: root's output receives every rank's input (bytes each) in rank order.
//  - scatter: each rank's output receives block rank() (bytes) of the root's input.
//  - barrier: returns once every rank has entered.
#pragma once

#include <cstddef>
#include <vector>

#include "common/types.h"

// Declares the collectives above on `const Context& ctx`, in the enclosing namespace.
#define XCCL_COLLECTIVES(Context)                                                                  \
  void allReduce(const Context& ctx, void* data, size_t count, DataType type, ReduceOp op);        \
  void broadcast(const Context& ctx, void* data, size_t bytes, int root);                          \
  void reduce(const Context& ctx, void* data, size_t count, DataType type, ReduceOp op, int root); \
  void allGather(const Context& ctx, const void* input, void* output,                              \
                 const std::vector<size_t>& bytesPerRank);                                         \
  void reduceScatter(const Context& ctx, const void* input, void* output, size_t count,            \
                     DataType type, ReduceOp op);                                                  \
  void allToAll(const Context& ctx, const void* input, const std::vector<size_t>& sendOffsets,     \
                const std::vector<size_t>& sendLengths, void* output,                              \
                const std::vector<size_t>& recvOffsets, const std::vector<size_t>& recvLengths);   \
  void gather(const Context& ctx, const void* input, size_t bytes, void* output, int root);        \
  void scatter(const Context& ctx, const void* input, void* output, size_t bytes, int root);       \
  void barrier(const Context& ctx);
