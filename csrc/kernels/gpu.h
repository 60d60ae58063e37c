// The one CUDA/HIP alias header for device code (docs/gpu.md, "ROCm"): kernel sources are written
// once against these names and compile with nvcc or with hipcc -x hip. The runtime-API names, the
// XCCL_GPU_HIP decision and XCCL_GPU_CHECK come from common/gpu_runtime.h, which host code uses
// alone; this header adds the device headers. Only device code includes it.
#pragma once

#include "common/gpu_runtime.h"

#if XCCL_GPU_HIP
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#else
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif
