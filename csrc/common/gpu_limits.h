// What the layers below the backend need to know about xccl's GPU kernels, without including them
// (the dependency rule: common <- kernels, net, topo <- algo <- backend): how many ranks and blocks
// a launch serves, the size of the flag area that net/regions/cuda_ipc allocates and the kernels
// use, and which dtypes and reductions the kernels implement (what algo's GPU plan may send to
// them). kernels/device_handle.h and kernels/launch_checks.cc define their types and checks from
// these and static_assert that they agree. Plain C++: no CUDA/HIP headers.
#pragma once

#include <cstddef>

#include "common/types.h"

namespace xccl {

constexpr int kGpuMaxRanks = 8;  // ranks of one node joined by NVLink/xGMI
constexpr int kGpuMaxBlocks = 80;  // blocks of one launch; aiter uses 80 on MI300X, vLLM 36
// Blocks per launch unless the launch says otherwise (kernels::kDefaultMaxBlocks, which says why);
// algo's grid cap for ranks sharing a GPU never exceeds it.
constexpr int kGpuDefaultMaxBlocks = 32;
// One 128-byte row of per-peer flags per block (kernels::FlagRow); rows are padded to 128 bytes
// so that writers of different blocks do not contend for one line.
constexpr size_t kGpuFlagRowBytes = 128;
constexpr size_t kGpuFlagAreaBytes = kGpuMaxBlocks * kGpuFlagRowBytes;

// Reductions the kernels implement: float32, float16 and bfloat16 with SUM, AVG, PREMUL_SUM, MIN
// and MAX (fp32 accumulation). The copy collectives move bytes, so every dtype.
inline bool gpuKernelReduces(DataType dtype, ReduceOp op) {
  const bool typeOk =
      dtype == DataType::kFloat32 || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
  const bool opOk = op == ReduceOp::kSum || op == ReduceOp::kAvg || op == ReduceOp::kPreMulSum ||
                    op == ReduceOp::kMin || op == ReduceOp::kMax;
  return typeOk && opOk;
}
inline bool gpuKernelCopies(DataType dtype) { return elementSize(dtype) > 0; }

}  // namespace xccl
