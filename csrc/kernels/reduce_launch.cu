// Launchers of the reducing collectives (kernels in reduce_kernels.cuh).
#include "kernels/launch.h"
#include "kernels/reduce_dispatch.cuh"

namespace xccl::kernels {
namespace {

// The one runtime-to-compile-time dispatch of the reducing launchers: the dtype here, then
// (reduce kind, world size) in launchReduceTyped<T>.
void dispatchReduce(DataType dtype, ReduceKind kind, int world, const ReduceLaunch& launch) {
  switch (dtype) {
    case DataType::kFloat32: return launchReduceTyped<float>(launch, kind, world);
    case DataType::kFloat16: return launchReduceTyped<Half>(launch, kind, world);
    case DataType::kBFloat16: return launchReduceTyped<BFloat16>(launch, kind, world);
    default: XCCL_THROW(ErrorKind::kInvalidArgument, "no kernel for ", dataTypeName(dtype));
  }
}

}  // namespace

void launchAllReduce(const AllReduceArgs& args, void* stream) {
  validate(args);
  if (args.count == 0) return;
  const ReduceSpec spec = reduceSpec(args.dtype, args.op, args.preMulFactor, args.handle.worldSize);
  const size_t bytes = args.count * elementSize(args.dtype);
  const ReduceLaunch launch{ReduceParams{args.handle, args.output, args.count, 0, spec.preMul,
                                         spec.postDiv, args.preMulFactorOnDevice},
                            reduceGridBlocks(bytes, args.shape),
                            args.algorithm == Algorithm::kTwoShot,
                            static_cast<gpuStream_t>(stream)};
  dispatchReduce(args.dtype, spec.kind, args.handle.worldSize, launch);
}

void launchReduceScatter(const ReduceScatterArgs& args, void* stream) {
  validate(args);
  if (args.count == 0) return;
  const ReduceSpec spec = reduceSpec(args.dtype, args.op, args.preMulFactor, args.handle.worldSize);
  const size_t srcOffset = static_cast<size_t>(args.handle.rank) * args.count;
  const size_t bytes = args.count * elementSize(args.dtype);
  const ReduceLaunch launch{ReduceParams{args.handle, args.output, args.count, srcOffset,
                                         spec.preMul, spec.postDiv, args.preMulFactorOnDevice},
                            reduceGridBlocks(bytes, args.shape), false,
                            static_cast<gpuStream_t>(stream)};
  dispatchReduce(args.dtype, spec.kind, args.handle.worldSize, launch);
}

}  // namespace xccl::kernels
