// Virtual ranks: N ranks as N CUDA/HIP streams of one process on one GPU, with plain device
// pointers in the DeviceHandles (docs/algorithms.md). Shared by the GPU tests and
// xccl_kernel_bench.
// Host objects own everything (RAII); kernels borrow handles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/gpu_runtime.h"
#include "kernels/device_handle.h"
#include "kernels/launch.h"

namespace xccl::testing {

// True when the CUDA/HIP runtime reports at least one device; the GPU tests skip otherwise.
bool gpuAvailable();

// Throws xccl::Error with the runtime's message when a CUDA/HIP call fails.
void gpuCheck(gpuError_t rc, const char* what);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  char* get() const { return data_; }
  size_t size() const { return size_; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
};

class VirtualRanks {
 public:
  // Per rank: a peer-visible buffer of bufferBytes and a private output of outputBytes (both
  // 256-byte aligned), a non-blocking stream, a zeroed flag area, epochs and error word.
  VirtualRanks(int world, size_t bufferBytes, size_t outputBytes);
  ~VirtualRanks();
  VirtualRanks(const VirtualRanks&) = delete;
  VirtualRanks& operator=(const VirtualRanks&) = delete;

  int world() const { return world_; }
  char* buffer(int rank) const { return buffers_[rank].get(); }
  char* output(int rank) const { return outputs_[rank].get(); }
  gpuStream_t stream(int rank) const { return streams_[rank]; }

  // Rank r's handle; buffers[p] = buffer(p) + bufferOffset (to test unaligned starts).
  kernels::DeviceHandle handle(int rank, size_t bufferOffset = 0) const;
  // The backend's cap for ranks sharing a GPU (backend/gpu/gpu_rules.h, sharedGpuMaxBlocks): few
  // enough blocks that all ranks' blocks fit on the GPU at once, at most kDefaultMaxBlocks.
  kernels::LaunchShape shape() const;
  // A launcher's arguments (any kernels::*Args) for `rank` with handle(rank) and output(rank);
  // the caller sets the rest (op, algorithm, root, offsets). `shape` is passed in, shape() asks
  // the runtime: a benchmark computes it once, outside its timed launches.
  template <typename Args>
  Args args(int rank, size_t count, DataType dtype, kernels::LaunchShape shape) const {
    Args a;
    a.handle = handle(rank);
    a.output = output(rank);
    a.count = count;
    a.dtype = dtype;
    a.shape = shape;
    return a;
  }

  void setTimeoutNs(uint64_t ns) { timeoutNs_ = ns; }

  // Enqueues body(rank, stream) for every rank as one fork-join on stream(0): streams 1..N-1 wait
  // for stream 0 first and stream 0 waits for all of them after, so the same call works eagerly
  // and inside a CUDA graph capture on stream(0).
  void forkJoin(const std::function<void(int rank, gpuStream_t stream)>& body);

  // Captures body(rank, stream(rank)) into one graph per rank, as each process of a real group
  // captures its own; replay() launches rank r's graph on stream(r) inside a fork-join on
  // stream(0). One graph holding every rank would make the ranks parallel branches of it, and
  // CUDA does not promise to run a graph's branches concurrently: a legal schedule that runs
  // them one after another leaves the first rank waiting for peers that never start. Graphs on
  // separate streams need only what every eager launch here needs.
  void capture(const std::function<void(int rank, gpuStream_t stream)>& body);
  void replay();

  // Stream-ordered copies on stream(0) (ordered with forkJoin and replay).
  void upload(char* device, const std::vector<uint8_t>& host);
  std::vector<uint8_t> download(const char* device, size_t bytes);

  // Waits for all streams; throws on a CUDA error.
  void synchronize();
  // The error words of all ranks (0 each when healthy), and their description.
  std::vector<uint32_t> errors();
  std::string describeErrors();
  // Zeroes flags, epochs and error words (all ranks together, as a host would after a failure).
  void resetSync();

 private:
  int world_;
  int smCount_ = 0;
  uint64_t timeoutNs_ = 2ull * 1000 * 1000 * 1000;
  std::vector<DeviceBuffer> buffers_;
  std::vector<DeviceBuffer> outputs_;
  DeviceBuffer flags_;  // world FlagAreas
  DeviceBuffer epochs_;  // world x kMaxBlocks counters
  DeviceBuffer errors_;  // world words
  std::vector<gpuStream_t> streams_;
  std::vector<gpuEvent_t> events_;  // fork event, then one join event per rank
  std::vector<XCCL_RT(GraphExec_t)> graphs_;  // one per rank once captured; empty before

  void destroyGraphs();
};

}  // namespace xccl::testing
