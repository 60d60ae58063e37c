// Sequences of collective calls run on the CPU emulation of the real kernels (emulator.h): every
// rank issues its copy-ins and launches back to back through one set of workspace buffers, flags
// and epochs, so consecutive calls overlap across ranks, and every call's result on every rank is
// checked bit for bit against the CPU reference (reference.h). Shared by test_gpu_emulated (and
// its ThreadSanitizer build) and the mutation tests (test_gpu_emulated_mutants).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/types.h"

namespace xccl::kernels::emulated {

enum class Collective { kOneShot, kTwoShot, kReduceScatter, kAllGather, kBroadcast, kAllToAll };
std::string collectiveName(Collective c);
bool isReduce(Collective c);
int syncsPerKernel(Collective c);  // sync() calls of the collective's kernel

// One call. Reduce collectives count elements of the sequence's dtype (reduce-scatter: per output
// chunk); copy collectives count bytes (per chunk).
struct Call {
  size_t count = 1;
  int blocks = 1;
  size_t inOffset = 0;   // elements into every rank's workspace buffer where its input starts
  size_t outOffset = 0;  // elements into the rank's private output
  bool inPlace = false;  // two-shot / reduce-scatter: the output is this rank's own buffer (chunk)
  ReduceOp op = ReduceOp::kSum;
  float factor = 0.37f;  // PREMUL_SUM
  bool deviceFactor = false;  // PREMUL_SUM factor read from (emulated) device memory
  int root = 0;  // broadcast
  int parts = 1;  // copy collectives: parts per source
};

struct Sequence {
  Collective collective = Collective::kOneShot;
  int world = 2;  // 1, 2, 3, 5 or 8 (the instantiated kernels)
  DataType dtype = DataType::kFloat32;  // reduce collectives
  std::vector<Call> calls;
  uint64_t seed = 1;  // inputs and delays; named in every failure
};

// Runs the sequence; "" when every call on every rank matched the reference bit for bit, left the
// error word clear and made no misaligned vector access, else the first failure (with the seed).
std::string runSequence(const Sequence& s);

// The coverage sequence of a collective: odd counts, unaligned offsets, grids of 1 and 3 blocks
// (or 1 and W + 1) interleaved on one set of epochs, every op, in-place and device-factor calls
// where the collective has them.
Sequence coverageSequence(Collective c, int world, DataType dtype, uint64_t seed);

}  // namespace xccl::kernels::emulated
