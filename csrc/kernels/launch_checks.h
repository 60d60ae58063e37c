// Host-side pure logic of the launchers: argument validation, the mapping of c10d reduce ops onto
// the kernels' reductions, grid sizing and error-word decoding. No CUDA/HIP headers; built in
// every configuration and unit-tested on CPU (tests/cpp/gpu/test_partition.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/gpu_limits.h"
#include "common/types.h"
#include "kernels/launch.h"

namespace xccl::kernels {

constexpr int kThreadsPerBlock = 512;
// Blocks per launch unless LaunchShape says otherwise. Public starting points: vLLM 36 ("too many
// SMs will cause contention on NVLink"), torch symm-mem and TensorRT-LLM 24. Not yet measured for
// xccl on multi-GPU hardware.
constexpr int kDefaultMaxBlocks = kGpuDefaultMaxBlocks;
// Bytes of output per block before another block is added: 512 threads x 16 B x 8 vectors each.
// Small messages use few blocks, so fewer flag pairs sit on the latency-critical path.
constexpr size_t kBytesPerBlock = 64 * 1024;

// The three reduction kernels behind the five supported ops. Sum covers SUM, AVG and PREMUL_SUM
// through two runtime factors: acc = sum_p(x_p * preMul) / postDiv, both factors 1 for SUM (exact:
// x * 1 and x / 1 are identities in IEEE arithmetic, so SUM is the plain rank-order sum).
enum class ReduceKind : uint8_t { kSum, kMin, kMax };

struct ReduceSpec {
  ReduceKind kind;
  float preMul;   // PREMUL_SUM's factor, else 1
  float postDiv;  // AVG's world size, else 1; divided (rounds once), not multiplied by 1/W
};

bool kernelSupports(DataType dtype, ReduceOp op);
bool kernelSupports(DataType dtype);  // for the byte-copy collectives: every dtype

// Throws kInvalidArgument when (dtype, op) has no kernel.
ReduceSpec reduceSpec(DataType dtype, ReduceOp op, float preMulFactor, int worldSize);

// Blocks for a launch whose largest per-rank stream is `bytes`; deterministic in its arguments.
int effectiveMaxBlocks(const LaunchShape& shape);
int reduceGridBlocks(size_t bytes, const LaunchShape& shape);

// Copy collectives pull `sources` chunks of `chunkBytes` each. Every source gets partsPerSource
// blocks' worth of work; blocks = min(sources * partsPerSource, maxBlocks) and the kernel strides
// over the (source, part) items, so all sources are in flight at once.
struct CopyGrid {
  int blocks;
  int partsPerSource;
};
CopyGrid copyGrid(size_t chunkBytes, int sources, const LaunchShape& shape);

bool rangesOverlap(const void* a, size_t aBytes, const void* b, size_t bBytes);

// Throw kInvalidArgument on anything the kernels cannot run safely. Called by the launchers before
// enqueuing; exposed for tests and for the backend to validate early.
void validate(const AllReduceArgs& args);
void validate(const ReduceScatterArgs& args);
void validate(const AllGatherArgs& args);
void validate(const BroadcastArgs& args);
void validate(const AllToAllArgs& args);

// Human-readable text for an error word, e.g. "flag wait timed out (no signal from ranks 1, 3)".
std::string describeDeviceError(uint32_t word);

}  // namespace xccl::kernels
