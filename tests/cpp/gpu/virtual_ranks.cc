#include "gpu/virtual_ranks.h"

#include <algorithm>
#include <utility>

#include "backend/gpu_rules.h"
#include "common/error.h"
#include "kernels/plan.h"

namespace xccl::testing {

bool gpuAvailable() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" / "no driver" error
    return false;
  }
  return count > 0;
}

void cudaCheck(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess) {
    XCCL_THROW(ErrorKind::kInternal, what, " failed: ", cudaGetErrorString(rc));
  }
}

DeviceBuffer::DeviceBuffer(size_t bytes) : size_(bytes) {
  // Round up so a zero-byte buffer still has a distinct valid address.
  void* p = nullptr;
  cudaCheck(cudaMalloc(&p, std::max<size_t>(bytes, 256)), "cudaMalloc");
  data_ = static_cast<char*>(p);
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

VirtualRanks::VirtualRanks(int world, size_t bufferBytes, size_t outputBytes) : world_(world) {
  XCCL_CHECK(world >= 1 && world <= kernels::kMaxRanks, "world ", world);
  int device = 0;
  cudaCheck(cudaGetDevice(&device), "cudaGetDevice");
  cudaCheck(cudaDeviceGetAttribute(&smCount_, cudaDevAttrMultiProcessorCount, device),
            "cudaDeviceGetAttribute");
  flags_ = DeviceBuffer(sizeof(kernels::FlagArea) * world);
  epochs_ = DeviceBuffer(sizeof(uint32_t) * kernels::kMaxBlocks * world);
  errors_ = DeviceBuffer(sizeof(uint32_t) * world);
  for (int r = 0; r < world; ++r) {
    buffers_.emplace_back(bufferBytes);
    outputs_.emplace_back(outputBytes);
    cudaStream_t stream;
    cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    streams_.push_back(stream);
  }
  for (int i = 0; i <= world; ++i) {
    cudaEvent_t event;
    cudaCheck(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    events_.push_back(event);
  }
  resetSync();
}

VirtualRanks::~VirtualRanks() {
  // Best effort: never throw from a destructor; a failed kernel has already been reported.
  for (cudaStream_t s : streams_) cudaStreamSynchronize(s);
  if (graph_ != nullptr) cudaGraphExecDestroy(graph_);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  for (cudaStream_t s : streams_) cudaStreamDestroy(s);
}

kernels::DeviceHandle VirtualRanks::handle(int rank, size_t bufferOffset) const {
  kernels::DeviceHandle h{};
  auto* areas = reinterpret_cast<kernels::FlagArea*>(flags_.get());
  for (int p = 0; p < world_; ++p) {
    h.buffers[p] = buffers_[p].get() + bufferOffset;
    h.flags[p] = areas + p;
  }
  h.epochs = reinterpret_cast<uint32_t*>(epochs_.get()) + rank * kernels::kMaxBlocks;
  h.error = reinterpret_cast<uint32_t*>(errors_.get()) + rank;
  h.timeoutNs = timeoutNs_;
  h.rank = rank;
  h.worldSize = world_;
  return h;
}

kernels::LaunchShape VirtualRanks::shape() const {
  // The cap the backend uses for ranks that share a GPU (backend/gpu_rules.h): the virtual ranks
  // are world_ ranks on one GPU, and must all have their blocks resident at once.
  int device = 0, threads = 0, regsPerSm = 0, regsPerBlock = 0;
  cudaCheck(cudaGetDevice(&device), "cudaGetDevice");
  cudaCheck(cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, device),
            "cudaDeviceGetAttribute");
  cudaCheck(cudaDeviceGetAttribute(&regsPerSm, cudaDevAttrMaxRegistersPerMultiprocessor, device),
            "cudaDeviceGetAttribute");
  cudaCheck(cudaDeviceGetAttribute(&regsPerBlock, cudaDevAttrMaxRegistersPerBlock, device),
            "cudaDeviceGetAttribute");
  const int perSm = backend::rules::residentBlocksPerSm(kernels::kThreadsPerBlock, threads,
                                                        regsPerSm, regsPerBlock);
  const int cap = backend::rules::sharedGpuMaxBlocks(perSm, smCount_, world_);
  XCCL_CHECK(cap != backend::rules::kCannotFit, world_, " virtual ranks do not fit on ", smCount_,
             " SMs");
  return kernels::LaunchShape{cap};
}

void VirtualRanks::forkJoin(const std::function<void(int, cudaStream_t)>& body) {
  cudaCheck(cudaEventRecord(events_[0], streams_[0]), "cudaEventRecord(fork)");
  for (int r = 1; r < world_; ++r) {
    cudaCheck(cudaStreamWaitEvent(streams_[r], events_[0], 0), "cudaStreamWaitEvent(fork)");
  }
  for (int r = 0; r < world_; ++r) body(r, streams_[r]);
  for (int r = 1; r < world_; ++r) {
    cudaCheck(cudaEventRecord(events_[r], streams_[r]), "cudaEventRecord(join)");
    cudaCheck(cudaStreamWaitEvent(streams_[0], events_[r], 0), "cudaStreamWaitEvent(join)");
  }
}

void VirtualRanks::capture(const std::function<void(int, cudaStream_t)>& body) {
  if (graph_ != nullptr) {
    cudaCheck(cudaGraphExecDestroy(graph_), "cudaGraphExecDestroy");
    graph_ = nullptr;
  }
  cudaGraph_t graph;
  cudaCheck(cudaStreamBeginCapture(streams_[0], cudaStreamCaptureModeThreadLocal),
            "cudaStreamBeginCapture");
  try {
    forkJoin(body);
  } catch (...) {
    cudaStreamEndCapture(streams_[0], &graph);
    throw;
  }
  cudaCheck(cudaStreamEndCapture(streams_[0], &graph), "cudaStreamEndCapture");
  const cudaError_t rc = cudaGraphInstantiate(&graph_, graph, 0);
  cudaGraphDestroy(graph);
  cudaCheck(rc, "cudaGraphInstantiate");
}

void VirtualRanks::replay() {
  XCCL_CHECK(graph_ != nullptr, "replay() before capture()");
  cudaCheck(cudaGraphLaunch(graph_, streams_[0]), "cudaGraphLaunch");
}

void VirtualRanks::upload(char* device, const std::vector<uint8_t>& host) {
  if (host.empty()) return;
  cudaCheck(cudaMemcpyAsync(device, host.data(), host.size(), cudaMemcpyHostToDevice, streams_[0]),
            "cudaMemcpyAsync(upload)");
  // Pageable source: wait so the host vector may die right after the call.
  cudaCheck(cudaStreamSynchronize(streams_[0]), "cudaStreamSynchronize(upload)");
}

std::vector<uint8_t> VirtualRanks::download(const char* device, size_t bytes) {
  std::vector<uint8_t> host(bytes);
  if (bytes == 0) return host;
  cudaCheck(cudaMemcpyAsync(host.data(), device, bytes, cudaMemcpyDeviceToHost, streams_[0]),
            "cudaMemcpyAsync(download)");
  cudaCheck(cudaStreamSynchronize(streams_[0]), "cudaStreamSynchronize(download)");
  return host;
}

void VirtualRanks::synchronize() {
  for (cudaStream_t s : streams_) cudaCheck(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

std::vector<uint32_t> VirtualRanks::errors() {
  synchronize();
  std::vector<uint32_t> words(world_);
  cudaCheck(cudaMemcpy(words.data(), errors_.get(), sizeof(uint32_t) * world_,
                       cudaMemcpyDeviceToHost),
            "cudaMemcpy(errors)");
  return words;
}

std::string VirtualRanks::describeErrors() {
  std::string text;
  const std::vector<uint32_t> words = errors();
  for (int r = 0; r < world_; ++r) {
    if (words[r] != 0) {
      text += "rank " + std::to_string(r) + ": " + kernels::describeDeviceError(words[r]) + "; ";
    }
  }
  return text;
}

void VirtualRanks::resetSync() {
  synchronize();
  cudaCheck(cudaMemset(flags_.get(), 0, std::max<size_t>(flags_.size(), 1)), "cudaMemset(flags)");
  cudaCheck(cudaMemset(epochs_.get(), 0, epochs_.size()), "cudaMemset(epochs)");
  cudaCheck(cudaMemset(errors_.get(), 0, errors_.size()), "cudaMemset(errors)");
  cudaCheck(cudaDeviceSynchronize(), "cudaDeviceSynchronize(reset)");
}

}  // namespace xccl::testing
