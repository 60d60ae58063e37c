#include "gpu/virtual_ranks.h"

#include <algorithm>
#include <utility>

#include "backend/gpu/gpu_rules.h"
#include "common/error.h"
#include "kernels/launch_checks.h"

namespace xccl::testing {

bool gpuAvailable() {
  int count = 0;
  const gpuError_t rc = XCCL_RT(GetDeviceCount)(&count);
  if (rc != gpuSuccess) {
    (void)gpuGetLastError();  // clear the sticky "no device" / "no driver" error
    return false;
  }
  return count > 0;
}

void gpuCheck(gpuError_t rc, const char* what) {
  if (rc != gpuSuccess) {
    XCCL_THROW(ErrorKind::kInternal, what, " failed: ", gpuGetErrorString(rc));
  }
}

DeviceBuffer::DeviceBuffer(size_t bytes) : size_(bytes) {
  // Round up so a zero-byte buffer still has a distinct valid address.
  void* p = nullptr;
  gpuCheck(XCCL_RT(Malloc)(&p, std::max<size_t>(bytes, 256)), "Malloc");
  data_ = static_cast<char*>(p);
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) (void)XCCL_RT(Free)(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) (void)XCCL_RT(Free)(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

VirtualRanks::VirtualRanks(int world, size_t bufferBytes, size_t outputBytes) : world_(world) {
  XCCL_CHECK(world >= 1 && world <= kernels::kMaxRanks, "world ", world);
  int device = 0;
  gpuCheck(XCCL_RT(GetDevice)(&device), "GetDevice");
  gpuCheck(XCCL_RT(DeviceGetAttribute)(&smCount_, gpuDevAttrMultiProcessorCount, device),
           "DeviceGetAttribute");
  flags_ = DeviceBuffer(sizeof(kernels::FlagArea) * world);
  epochs_ = DeviceBuffer(sizeof(uint32_t) * kernels::kMaxBlocks * world);
  errors_ = DeviceBuffer(sizeof(uint32_t) * world);
  for (int r = 0; r < world; ++r) {
    buffers_.emplace_back(bufferBytes);
    outputs_.emplace_back(outputBytes);
    gpuStream_t stream;
    gpuCheck(XCCL_RT(StreamCreateWithFlags)(&stream, XCCL_RT(StreamNonBlocking)), "StreamCreate");
    streams_.push_back(stream);
  }
  for (int i = 0; i <= world; ++i) {
    gpuEvent_t event;
    gpuCheck(XCCL_RT(EventCreateWithFlags)(&event, XCCL_RT(EventDisableTiming)), "EventCreate");
    events_.push_back(event);
  }
  resetSync();
}

VirtualRanks::~VirtualRanks() {
  // Best effort, results ignored: never throw from a destructor; a failed kernel has already
  // been reported.
  for (gpuStream_t s : streams_) (void)XCCL_RT(StreamSynchronize)(s);
  destroyGraphs();
  for (gpuEvent_t e : events_) (void)XCCL_RT(EventDestroy)(e);
  for (gpuStream_t s : streams_) (void)XCCL_RT(StreamDestroy)(s);
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
  // The cap the backend uses for ranks that share a GPU (backend/gpu/gpu_rules.h): the virtual
  // ranks are world_ ranks on one GPU, and must all have their blocks resident at once.
  int device = 0, threads = 0, regsPerSm = 0, regsPerBlock = 0;
  gpuCheck(XCCL_RT(GetDevice)(&device), "GetDevice");
  gpuCheck(XCCL_RT(DeviceGetAttribute)(&threads, gpuDevAttrMaxThreadsPerMultiProcessor, device),
           "DeviceGetAttribute");
  gpuCheck(XCCL_RT(DeviceGetAttribute)(&regsPerSm, gpuDevAttrMaxRegistersPerMultiprocessor, device),
           "DeviceGetAttribute");
  gpuCheck(XCCL_RT(DeviceGetAttribute)(&regsPerBlock, gpuDevAttrMaxRegistersPerBlock, device),
           "DeviceGetAttribute");
  const int perSm =
      algo::residentBlocksPerSm(kernels::kThreadsPerBlock, threads, regsPerSm, regsPerBlock);
  const int cap = algo::sharedGpuMaxBlocks(perSm, smCount_, world_);
  XCCL_CHECK(cap != algo::kCannotFit, world_, " virtual ranks do not fit on ", smCount_, " SMs");
  return kernels::LaunchShape{cap};
}

void VirtualRanks::forkJoin(const std::function<void(int, gpuStream_t)>& body) {
  gpuCheck(XCCL_RT(EventRecord)(events_[0], streams_[0]), "EventRecord(fork)");
  for (int r = 1; r < world_; ++r) {
    gpuCheck(XCCL_RT(StreamWaitEvent)(streams_[r], events_[0], 0), "StreamWaitEvent(fork)");
  }
  for (int r = 0; r < world_; ++r) body(r, streams_[r]);
  for (int r = 1; r < world_; ++r) {
    gpuCheck(XCCL_RT(EventRecord)(events_[r], streams_[r]), "EventRecord(join)");
    gpuCheck(XCCL_RT(StreamWaitEvent)(streams_[0], events_[r], 0), "StreamWaitEvent(join)");
  }
}

void VirtualRanks::destroyGraphs() {
  for (XCCL_RT(GraphExec_t) graph : graphs_) (void)XCCL_RT(GraphExecDestroy)(graph);
  graphs_.clear();
}

void VirtualRanks::capture(const std::function<void(int, gpuStream_t)>& body) {
  destroyGraphs();
  std::vector<XCCL_RT(GraphExec_t)> graphs;
  try {
    for (int r = 0; r < world_; ++r) {
      XCCL_RT(Graph_t) graph = nullptr;
      gpuCheck(XCCL_RT(StreamBeginCapture)(streams_[r], XCCL_RT(StreamCaptureModeThreadLocal)),
               "StreamBeginCapture");
      try {
        body(r, streams_[r]);
      } catch (...) {
        (void)XCCL_RT(StreamEndCapture)(streams_[r], &graph);
        if (graph != nullptr) (void)XCCL_RT(GraphDestroy)(graph);
        throw;
      }
      gpuCheck(XCCL_RT(StreamEndCapture)(streams_[r], &graph), "StreamEndCapture");
      XCCL_RT(GraphExec_t) exec = nullptr;
      const gpuError_t rc = XCCL_RT(GraphInstantiateWithFlags)(&exec, graph, 0);
      (void)XCCL_RT(GraphDestroy)(graph);
      gpuCheck(rc, "GraphInstantiate");
      graphs.push_back(exec);
    }
  } catch (...) {
    for (XCCL_RT(GraphExec_t) exec : graphs) (void)XCCL_RT(GraphExecDestroy)(exec);
    throw;
  }
  graphs_ = std::move(graphs);
}

void VirtualRanks::replay() {
  XCCL_CHECK(!graphs_.empty(), "replay() before capture()");
  forkJoin([&](int rank, gpuStream_t stream) {
    gpuCheck(XCCL_RT(GraphLaunch)(graphs_[rank], stream), "GraphLaunch");
  });
}

void VirtualRanks::upload(char* device, const std::vector<uint8_t>& host) {
  if (host.empty()) return;
  gpuCheck(XCCL_RT(MemcpyAsync)(device, host.data(), host.size(), XCCL_RT(MemcpyHostToDevice),
                                streams_[0]),
           "MemcpyAsync(upload)");
  // Pageable source: wait so the host vector may die right after the call.
  gpuCheck(XCCL_RT(StreamSynchronize)(streams_[0]), "StreamSynchronize(upload)");
}

std::vector<uint8_t> VirtualRanks::download(const char* device, size_t bytes) {
  std::vector<uint8_t> host(bytes);
  if (bytes == 0) return host;
  gpuCheck(XCCL_RT(MemcpyAsync)(host.data(), device, bytes, XCCL_RT(MemcpyDeviceToHost),
                                streams_[0]),
           "MemcpyAsync(download)");
  gpuCheck(XCCL_RT(StreamSynchronize)(streams_[0]), "StreamSynchronize(download)");
  return host;
}

void VirtualRanks::synchronize() {
  for (gpuStream_t s : streams_) gpuCheck(XCCL_RT(StreamSynchronize)(s), "StreamSynchronize");
}

std::vector<uint32_t> VirtualRanks::errors() {
  synchronize();
  std::vector<uint32_t> words(world_);
  gpuCheck(XCCL_RT(Memcpy)(words.data(), errors_.get(), sizeof(uint32_t) * world_,
                           XCCL_RT(MemcpyDeviceToHost)),
           "Memcpy(errors)");
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
  gpuCheck(XCCL_RT(Memset)(flags_.get(), 0, std::max<size_t>(flags_.size(), 1)), "Memset(flags)");
  gpuCheck(XCCL_RT(Memset)(epochs_.get(), 0, epochs_.size()), "Memset(epochs)");
  gpuCheck(XCCL_RT(Memset)(errors_.get(), 0, errors_.size()), "Memset(errors)");
  gpuCheck(XCCL_RT(DeviceSynchronize)(), "DeviceSynchronize(reset)");
}

}  // namespace xccl::testing
