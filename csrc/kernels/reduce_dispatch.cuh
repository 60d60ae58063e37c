// Launch side of the reducing kernels: (reduce kind, world size) -> kernel for one element type.
// Each element type is instantiated in its own reduce_<type>.cu so the three sets compile in
// parallel; reduce_launch.cu holds the launchers and the dtype half of the dispatch.
#pragma once

#include "kernels/gpu.h"
#include "kernels/reduce_kernels.cuh"

namespace xccl::kernels {

struct ReduceLaunch {
  ReduceParams params;
  int blocks;
  bool twoShot;
  gpuStream_t stream;
};

template <typename T, ReduceKind K, int W>
void launchReduceKernel(const ReduceLaunch& launch) {
  if (launch.twoShot) {
    twoShotKernel<T, K, W><<<launch.blocks, kThreadsPerBlock, 0, launch.stream>>>(launch.params);
  } else {
    directReduceKernel<T, K, W>
        <<<launch.blocks, kThreadsPerBlock, 0, launch.stream>>>(launch.params);
  }
  XCCL_GPU_CHECK(ErrorKind::kInternal, gpuGetLastError());
}

template <typename T, ReduceKind K>
void launchReduceWorld(const ReduceLaunch& launch, int world) {
  switch (world) {
    case 1: return launchReduceKernel<T, K, 1>(launch);
    case 2: return launchReduceKernel<T, K, 2>(launch);
    case 3: return launchReduceKernel<T, K, 3>(launch);
    case 4: return launchReduceKernel<T, K, 4>(launch);
    case 5: return launchReduceKernel<T, K, 5>(launch);
    case 6: return launchReduceKernel<T, K, 6>(launch);
    case 7: return launchReduceKernel<T, K, 7>(launch);
    case 8: return launchReduceKernel<T, K, 8>(launch);
  }
  XCCL_THROW(ErrorKind::kInvalidArgument, "no kernel for world size ", world);
}

// (reduce kind, world size) -> kernel for element type T; called only by dispatchReduce in
// reduce_launch.cu, which picks T (one dispatch path per launcher).
template <typename T>
void launchReduceTyped(const ReduceLaunch& launch, ReduceKind kind, int world) {
  switch (kind) {
    case ReduceKind::kSum: return launchReduceWorld<T, ReduceKind::kSum>(launch, world);
    case ReduceKind::kMin: return launchReduceWorld<T, ReduceKind::kMin>(launch, world);
    case ReduceKind::kMax: return launchReduceWorld<T, ReduceKind::kMax>(launch, world);
  }
}

extern template void launchReduceTyped<float>(const ReduceLaunch&, ReduceKind, int);
extern template void launchReduceTyped<Half>(const ReduceLaunch&, ReduceKind, int);
extern template void launchReduceTyped<BFloat16>(const ReduceLaunch&, ReduceKind, int);

}  // namespace xccl::kernels
