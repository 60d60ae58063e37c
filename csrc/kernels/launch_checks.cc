#include "kernels/launch_checks.h"

#include <algorithm>
#include <limits>

#include "common/error.h"
#include "common/gpu_limits.h"

namespace xccl::kernels {

bool kernelSupports(DataType dtype) { return gpuKernelCopies(dtype); }

bool kernelSupports(DataType dtype, ReduceOp op) { return gpuKernelReduces(dtype, op); }

ReduceSpec reduceSpec(DataType dtype, ReduceOp op, float preMulFactor, int worldSize) {
  XCCL_CHECK_ARG(kernelSupports(dtype, op), "no GPU kernel for ", reduceOpName(op), " on ",
                 dataTypeName(dtype));
  switch (op) {
    case ReduceOp::kAvg: return ReduceSpec{ReduceKind::kSum, 1.0f, static_cast<float>(worldSize)};
    case ReduceOp::kPreMulSum: return ReduceSpec{ReduceKind::kSum, preMulFactor, 1.0f};
    case ReduceOp::kMin: return ReduceSpec{ReduceKind::kMin, 1.0f, 1.0f};
    case ReduceOp::kMax: return ReduceSpec{ReduceKind::kMax, 1.0f, 1.0f};
    default: return ReduceSpec{ReduceKind::kSum, 1.0f, 1.0f};
  }
}

int effectiveMaxBlocks(const LaunchShape& shape) {
  XCCL_CHECK_ARG(shape.maxBlocks >= 0, "maxBlocks must not be negative, got ", shape.maxBlocks);
  const int requested = shape.maxBlocks == 0 ? kDefaultMaxBlocks : shape.maxBlocks;
  return std::min(requested, kMaxBlocks);
}

int reduceGridBlocks(size_t bytes, const LaunchShape& shape) {
  const size_t wanted = (bytes + kBytesPerBlock - 1) / kBytesPerBlock;
  const size_t limit = static_cast<size_t>(effectiveMaxBlocks(shape));
  return static_cast<int>(std::clamp<size_t>(wanted, 1, limit));
}

CopyGrid copyGrid(size_t chunkBytes, int sources, const LaunchShape& shape) {
  const int maxBlocks = effectiveMaxBlocks(shape);
  const size_t wanted = std::max<size_t>(1, (chunkBytes + kBytesPerBlock - 1) / kBytesPerBlock);
  // Never more parts than a fair share of the grid: extra parts would only serialise behind the
  // other sources' parts instead of adding bandwidth.
  const size_t share = static_cast<size_t>(std::max(1, maxBlocks / sources));
  const int parts = static_cast<int>(std::min(wanted, share));
  return CopyGrid{std::min(sources * parts, maxBlocks), parts};
}

bool rangesOverlap(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  if (aBytes == 0 || bBytes == 0) return false;
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + bBytes && y < x + aBytes;
}

namespace {

void validateHandle(const DeviceHandle& h) {
  XCCL_CHECK_ARG(h.worldSize >= 1 && h.worldSize <= kMaxRanks, "GPU kernels support 1..", kMaxRanks,
                 " ranks, got ", h.worldSize);
  XCCL_CHECK_ARG(h.rank >= 0 && h.rank < h.worldSize, "rank ", h.rank, " outside world of ",
                 h.worldSize);
  for (int p = 0; p < h.worldSize; ++p) {
    XCCL_CHECK_ARG(h.flags[p] != nullptr, "flag area of rank ", p, " is null");
  }
  XCCL_CHECK_ARG(h.epochs != nullptr && h.error != nullptr, "epoch or error word is null");
  XCCL_CHECK_ARG(h.timeoutNs > 0, "timeoutNs must be positive");
}

// The largest element count per rank buffer that keeps every byte offset in size_t.
void validateSize(size_t count, size_t multiple, DataType dtype) {
  const size_t limit = std::numeric_limits<size_t>::max() / (multiple * elementSize(dtype));
  XCCL_CHECK_ARG(count <= limit, "element count ", count, " overflows the byte size");
}

// A collective reading `count` elements (times `multiple`) from every rank's buffer: the size
// fits and, unless count is 0, the output and every buffer exist. Whether there is data to move.
bool validateData(const DeviceHandle& h, size_t count, size_t multiple, const void* output,
                  DataType dtype) {
  validateSize(count, multiple, dtype);
  if (count == 0) return false;
  XCCL_CHECK_ARG(output != nullptr, "output is null");
  for (int p = 0; p < h.worldSize; ++p) {
    XCCL_CHECK_ARG(h.buffers[p] != nullptr, "buffer of rank ", p, " is null");
  }
  return true;
}

// Reductions load whole elements; a buffer misaligned for its dtype is a caller bug.
void validateElementAlignment(const DeviceHandle& h, const void* output, DataType dtype) {
  const size_t size = elementSize(dtype);
  XCCL_CHECK_ARG(reinterpret_cast<uintptr_t>(output) % size == 0, "output not aligned to ", size);
  for (int p = 0; p < h.worldSize; ++p) {
    XCCL_CHECK_ARG(reinterpret_cast<uintptr_t>(h.buffers[p]) % size == 0, "buffer of rank ", p,
                   " not aligned to ", size);
  }
}

// A device factor is PREMUL_SUM's alone, and the kernel loads it as one aligned float.
void validateDeviceFactor(const float* factor, ReduceOp op) {
  if (factor == nullptr) return;
  XCCL_CHECK_ARG(op == ReduceOp::kPreMulSum, "a device pre-multiplication factor needs ",
                 reduceOpName(ReduceOp::kPreMulSum), ", not ", reduceOpName(op));
  XCCL_CHECK_ARG(reinterpret_cast<uintptr_t>(factor) % alignof(float) == 0,
                 "device pre-multiplication factor not aligned to ", alignof(float));
}

// The checks of a reduction's handle, op and factors.
void validateReduction(const DeviceHandle& h, DataType dtype, ReduceOp op, float factor,
                       const float* factorOnDevice) {
  validateHandle(h);
  reduceSpec(dtype, op, factor, h.worldSize);
  validateDeviceFactor(factorOnDevice, op);
}

const char* bytesOf(const void* p, size_t offset) { return static_cast<const char*>(p) + offset; }

}  // namespace

void validate(const AllReduceArgs& a) {
  validateReduction(a.handle, a.dtype, a.op, a.preMulFactor, a.preMulFactorOnDevice);
  if (!validateData(a.handle, a.count, 1, a.output, a.dtype)) return;
  validateElementAlignment(a.handle, a.output, a.dtype);
  const size_t bytes = a.count * elementSize(a.dtype);
  const void* own = a.handle.buffers[a.handle.rank];
  if (a.algorithm == Algorithm::kOneShot) {
    XCCL_CHECK_ARG(!rangesOverlap(a.output, bytes, own, bytes),
                   "one-shot all-reduce cannot run in place: output overlaps this rank's buffer");
  } else {
    XCCL_CHECK_ARG(a.output == own || !rangesOverlap(a.output, bytes, own, bytes),
                   "two-shot all-reduce output must equal or avoid this rank's buffer");
  }
}

void validate(const ReduceScatterArgs& a) {
  validateReduction(a.handle, a.dtype, a.op, a.preMulFactor, a.preMulFactorOnDevice);
  if (!validateData(a.handle, a.count, a.handle.worldSize, a.output, a.dtype)) return;
  validateElementAlignment(a.handle, a.output, a.dtype);
  const size_t chunk = a.count * elementSize(a.dtype);
  const void* own = a.handle.buffers[a.handle.rank];
  const void* inPlace = bytesOf(own, a.handle.rank * chunk);
  XCCL_CHECK_ARG(a.output == inPlace ||
                     !rangesOverlap(a.output, chunk, own, chunk * a.handle.worldSize),
                 "reduce-scatter output overlaps this rank's input other than its own chunk");
}

void validate(const AllGatherArgs& a) {
  validateHandle(a.handle);
  if (!validateData(a.handle, a.count, a.handle.worldSize, a.output, a.dtype)) return;
  const size_t chunk = a.count * elementSize(a.dtype);
  const void* own = a.handle.buffers[a.handle.rank];
  XCCL_CHECK_ARG(own == bytesOf(a.output, a.handle.rank * chunk) ||
                     !rangesOverlap(a.output, chunk * a.handle.worldSize, own, chunk),
                 "all-gather input overlaps the output other than at this rank's chunk");
}

void validate(const BroadcastArgs& a) {
  validateHandle(a.handle);
  XCCL_CHECK_ARG(a.root >= 0 && a.root < a.handle.worldSize, "broadcast root ", a.root,
                 " outside world of ", a.handle.worldSize);
  validateSize(a.count, 1, a.dtype);
  if (a.count == 0) return;
  XCCL_CHECK_ARG(a.output != nullptr, "output is null");
  const void* source = a.handle.buffers[a.root];
  XCCL_CHECK_ARG(source != nullptr, "buffer of the root ", a.root, " is null");
  const size_t bytes = a.count * elementSize(a.dtype);
  XCCL_CHECK_ARG(a.output == source || !rangesOverlap(a.output, bytes, source, bytes),
                 "broadcast output partially overlaps the root's buffer");
}

void validate(const AllToAllArgs& a) {
  validateHandle(a.handle);
  if (!validateData(a.handle, a.count, a.handle.worldSize, a.output, a.dtype)) return;
  const size_t total = a.count * elementSize(a.dtype) * a.handle.worldSize;
  XCCL_CHECK_ARG(!rangesOverlap(a.output, total, a.handle.buffers[a.handle.rank], total),
                 "all-to-all cannot run in place: output overlaps this rank's buffer");
}

std::string describeDeviceError(uint32_t word) {
  if (word == 0) return "no error";
  std::string text;
  if (word & kErrorAborted) text = "aborted by the host while GPU collectives were running";
  if (word & kErrorTimeout) text += std::string(text.empty() ? "" : "; ") + "flag wait timed out";
  std::string peers;
  int missing = 0;
  for (int p = 0; p < kMaxRanks; ++p) {
    if (word & (1u << p)) peers += (missing++ ? ", " : "") + std::to_string(p);
  }
  if (missing > 0) {
    text += std::string(" (no signal from rank") + (missing > 1 ? "s " : " ") + peers + ")";
  }
  const uint32_t unknown = word & ~(kErrorTimeout | kErrorAborted | kErrorPeerMask);
  if (unknown != 0)
    text += (text.empty() ? "" : "; ") + std::string("unknown bits ") + std::to_string(unknown);
  return text;
}

}  // namespace xccl::kernels
