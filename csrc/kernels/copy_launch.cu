// Launchers of the copying collectives (kernel in copy_kernel.cuh).
#include "kernels/copy_kernel.cuh"
#include "kernels/gpu.h"
#include "kernels/launch.h"

namespace xccl::kernels {
namespace {

void launchCopy(const DeviceHandle& handle, void* output, size_t chunkBytes, size_t srcOffset,
                int sources, int root, bool gather, const LaunchShape& shape, void* stream) {
  const CopyGrid grid = copyGrid(chunkBytes, sources, shape);
  const CopyParams params{handle,  output, chunkBytes,          srcOffset,
                          sources, root,   grid.partsPerSource, gather};
  pullCopyKernel<<<grid.blocks, kThreadsPerBlock, 0, static_cast<gpuStream_t>(stream)>>>(params);
  XCCL_GPU_CHECK(ErrorKind::kInternal, gpuGetLastError());
}

}  // namespace

void launchAllGather(const AllGatherArgs& args, void* stream) {
  validate(args);
  if (args.count == 0) return;
  const size_t chunk = args.count * elementSize(args.dtype);
  launchCopy(args.handle, args.output, chunk, 0, args.handle.worldSize, 0, true, args.shape,
             stream);
}

void launchBroadcast(const BroadcastArgs& args, void* stream) {
  validate(args);
  if (args.count == 0) return;
  const size_t bytes = args.count * elementSize(args.dtype);
  launchCopy(args.handle, args.output, bytes, 0, 1, args.root, false, args.shape, stream);
}

void launchAllToAll(const AllToAllArgs& args, void* stream) {
  validate(args);
  if (args.count == 0) return;
  const size_t chunk = args.count * elementSize(args.dtype);
  launchCopy(args.handle, args.output, chunk, args.handle.rank * chunk, args.handle.worldSize, 0,
             true, args.shape, stream);
}

}  // namespace xccl::kernels
