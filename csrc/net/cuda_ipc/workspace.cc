#include "net/cuda_ipc/workspace.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <random>
#include <type_traits>

#include "common/error.h"
#include "common/gpu_runtime.h"
#include "common/logging.h"
#include "kernels/device_handle.h"

namespace xccl::net::cuda_ipc {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

static_assert(sizeof(XCCL_RT(IpcMemHandle_t)) == kIpcHandleBytes, "record.h carries the handle");

// What create() and base() throw when CUDA IPC cannot work here (see workspace.h). common/error.h
// has no kind for "transport unavailable, fall back" yet; one constant to change when it does.
constexpr ErrorKind kIpcUnavailable = ErrorKind::kSystem;

std::string runtimeText(gpuError_t rc) {
  return detail::concat(gpuGetErrorName(rc), " (", gpuGetErrorString(rc), ")");
}

// Throws `kind` naming the failed call. Clears the runtime's last error first: the caller (torch)
// checks cudaGetLastError after its own launches and must not be blamed for ours.
#define XCCL_IPC_CHECK(kind, call)                                  \
  do {                                                              \
    const ::xccl::gpuError_t xccl_ipc_rc_ = (call);                 \
    if (xccl_ipc_rc_ != ::xccl::gpuSuccess) {                       \
      (void)::xccl::gpuGetLastError();                              \
      XCCL_THROW((kind), #call, " failed: ",                        \
                 ::xccl::net::cuda_ipc::runtimeText(xccl_ipc_rc_)); \
    }                                                               \
  } while (0)

// For destructors: logs instead of throwing. At process exit the runtime may already be unloading;
// the driver then reclaims everything and there is nothing to report.
void warnIfFailed(gpuError_t rc, const char* what) {
  if (rc == gpuSuccess) return;
  (void)gpuGetLastError();
  if (rc != gpuErrorUnloading) XCCL_WARN("cuda_ipc", what, " failed: ", runtimeText(rc));
}

// Makes `device` current for a scope and restores the caller's device after it: the backend shares
// its host threads with torch, whose current device must not change under it. Only switches when
// the device differs, because cudaSetDevice creates a device's primary context (memory on that GPU)
// and a caller already on `device` should pay nothing.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    status_ = XCCL_RT(GetDevice)(&previous_);
    if (status_ == gpuSuccess && previous_ != device) {
      status_ = XCCL_RT(SetDevice)(device);
      restore_ = status_ == gpuSuccess;
    }
  }
  ~ScopedDevice() {
    if (restore_) warnIfFailed(XCCL_RT(SetDevice)(previous_), "restoring the current device");
  }
  gpuError_t status() const { return status_; }

 private:
  int previous_ = 0;
  bool restore_ = false;
  gpuError_t status_ = gpuSuccess;
};

// The workspace's one allocation. CUDA: plain device memory (peers' flag stores reach a running
// kernel through NVLink/PCIe coherence). ROCm: plain hipMalloc memory is coarse-grained and a
// peer's store may stay invisible to a kernel polling it, so the allocation is uncached, as vLLM's
// and aiter's custom all-reduce allocate their signals and staging buffer together
// (hipExtMallocWithFlags(hipDeviceMallocUncached)); HIP headers older than that flag (ROCm 5.2)
// get fine-grained memory, the coherent kind they have. The kernels pair it with system-scope
// atomics on both sides (kernels/primitives.cuh).
gpuError_t allocate(void** base, size_t bytes) {
#if XCCL_GPU_HIP
#ifdef hipDeviceMallocUncached
  return hipExtMallocWithFlags(base, bytes, hipDeviceMallocUncached);
#else
  return hipExtMallocWithFlags(base, bytes, hipDeviceMallocFinegrained);
#endif
#else
  return cudaMalloc(base, bytes);
#endif
}

struct StreamDestroyer {
  void operator()(gpuStream_t stream) const {
    warnIfFailed(XCCL_RT(StreamDestroy)(stream), "destroying the zeroing stream");
  }
};

// Random once per process (see Record::processToken).
uint64_t processToken() {
  static const uint64_t token = [] {
    std::random_device random;
    return (static_cast<uint64_t>(random()) << 32) ^ random();
  }();
  return token;
}

std::string key(const std::string& prefix, int rank) { return prefix + "/" + std::to_string(rank); }

// Every rank's record, waiting for all of them against one deadline. On a timeout keeps looking
// (briefly) at the remaining ranks, so the error names every rank that is missing, not the first.
std::vector<Bytes> gatherRecords(Store& store, const std::string& prefix, int rank, int size,
                                 const Bytes& mine, milliseconds timeout) {
  store.set(key(prefix, rank), mine);
  const auto deadline = Clock::now() + timeout;
  std::vector<Bytes> all(size);
  std::string missing, storeError;
  for (int r = 0; r < size; ++r) {
    if (r == rank) {
      all[r] = mine;
      continue;
    }
    // At least 1 ms: to some stores (c10d's) a zero timeout means no bound at all.
    const auto left = std::max(
        milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
    try {
      all[r] = store.get(key(prefix, r), left);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kTimeout) throw;
      missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      if (storeError.empty()) storeError = e.what();
    }
  }
  if (!missing.empty()) {
    XCCL_THROW(ErrorKind::kTimeout, "cuda_ipc workspace '", prefix, "' (rank ", rank, " of ", size,
               "): ranks [", missing, "] did not publish within ", timeout.count(), " ms (",
               storeError, ")");
  }
  return all;
}

std::string describe(const Record& record) {
  return detail::concat("device ", record.device, " (bus ", record.busId, "), pid ", record.pid);
}

}  // namespace

Workspace::Workspace(int rank, int size, int device, const WorkspaceLayout& layout)
    : rank_(rank), size_(size), device_(device), layout_(layout) {}

std::unique_ptr<Workspace> Workspace::create(Store& store, const std::string& prefix, int rank,
                                             int size, int device, size_t dataBytes,
                                             milliseconds timeout) {
  // Equal on every rank (a precondition), so every rank refuses alike without publishing anything.
  XCCL_CHECK_ARG(size >= 1 && size <= kernels::kMaxRanks, "cuda_ipc workspace for ", size,
                 " ranks: between 1 and ", kernels::kMaxRanks, " are supported");
  XCCL_CHECK_ARG(rank >= 0 && rank < size, "cuda_ipc workspace: bad rank ", rank, " of ", size);

  // From here on a failure is published instead of thrown at once, so the peers fail too rather
  // than wait out the timeout; then every rank throws the lowest failing rank's kind.
  std::unique_ptr<Workspace> workspace;
  Record mine;
  std::exception_ptr myFailure;
  try {
    const WorkspaceLayout layout = layoutFor(dataBytes);
    int count = 0;
    XCCL_IPC_CHECK(ErrorKind::kInternal, XCCL_RT(GetDeviceCount)(&count));
    XCCL_CHECK_ARG(device >= 0 && device < count, "cuda_ipc workspace: device ", device, " of ",
                   count, " visible CUDA devices");
    workspace.reset(new Workspace(rank, size, device, layout));
    ScopedDevice scoped(device);
    XCCL_IPC_CHECK(ErrorKind::kInternal, scoped.status());

    void* base = nullptr;
    XCCL_IPC_CHECK(ErrorKind::kInternal, allocate(&base, layout.totalBytes));
    workspace->own_ = static_cast<char*>(base);
    // Zeroed and complete before the handle is published, hence before any peer can write a flag
    // (kernels/device_handle.h). A private non-blocking stream does not wait for the caller's work.
    XCCL_RT(Stream_t) stream = nullptr;
    XCCL_IPC_CHECK(ErrorKind::kInternal,
                   XCCL_RT(StreamCreateWithFlags)(&stream, XCCL_RT(StreamNonBlocking)));
    std::unique_ptr<std::remove_pointer_t<gpuStream_t>, StreamDestroyer> owned(stream);
    XCCL_IPC_CHECK(ErrorKind::kInternal,
                   XCCL_RT(MemsetAsync)(workspace->own_ + layout.flagsOffset, 0,
                                   layout.totalBytes - layout.flagsOffset, stream));
    XCCL_IPC_CHECK(ErrorKind::kInternal, XCCL_RT(StreamSynchronize)(stream));

    XCCL_RT(IpcMemHandle_t) handle;
    XCCL_IPC_CHECK(kIpcUnavailable, XCCL_RT(IpcGetMemHandle)(&handle, base));
    std::memcpy(mine.handle.data(), &handle, kIpcHandleBytes);
    char busId[kMaxBusIdBytes] = {};
    XCCL_IPC_CHECK(ErrorKind::kInternal,
                   XCCL_RT(DeviceGetPCIBusId)(busId, sizeof(busId) - 1, device));
    mine.busId = busId;
    mine.address = reinterpret_cast<uintptr_t>(base);
    mine.pid = ::getpid();
    mine.processToken = processToken();
    mine.device = device;
    mine.dataBytes = dataBytes;
  } catch (...) {
    myFailure = std::current_exception();
    mine = Record{};
    mine.failed = true;
    try {
      throw;
    } catch (const Error& e) {
      mine.failureKind = e.kind();
      mine.failure = e.what();
    } catch (const std::exception& e) {
      mine.failure = e.what();
    } catch (...) {
      mine.failure = "unknown exception";
    }
  }

  const std::vector<Bytes> published =
      gatherRecords(store, prefix, rank, size, encodeRecord(mine), timeout);
  std::vector<Record> records;
  for (const Bytes& bytes : published) records.push_back(decodeRecord(bytes));
  for (int r = 0; r < size; ++r) {
    if (!records[r].failed) continue;
    if (r == rank) std::rethrow_exception(myFailure);
    XCCL_THROW(records[r].failureKind, "cuda_ipc workspace '", prefix, "': rank ", r,
               " could not create its part: ", records[r].failure);
  }
  for (int r = 1; r < size; ++r) {
    XCCL_CHECK_ARG(records[r].dataBytes == records[0].dataBytes, "cuda_ipc workspace '", prefix,
                   "': ranks disagree on the data size: rank 0 passed ", records[0].dataBytes,
                   " bytes, rank ", r, " passed ", records[r].dataBytes);
  }

  workspace->records_ = std::move(records);
  workspace->mapped_.assign(size, nullptr);
  workspace->opened_.assign(size, false);
  workspace->mapped_[rank] = workspace->own_;
  if (rank == 0) {
    std::string where;
    for (const Record& r : workspace->records_) where += (where.empty() ? "" : ", ") + r.busId;
    XCCL_INFO("cuda_ipc", "workspace '", prefix, "': ", size, " ranks x ",
              workspace->layout_.totalBytes, " bytes (", dataBytes, " data) on GPUs [", where, "]");
  }
  return workspace;
}

Workspace::~Workspace() {
  ScopedDevice scoped(device_);
  warnIfFailed(scoped.status(), "making the workspace's device current in ~Workspace");
  for (size_t r = 0; r < opened_.size(); ++r) {
    if (opened_[r]) {
      warnIfFailed(XCCL_RT(IpcCloseMemHandle)(mapped_[r]), "closing a peer's workspace mapping");
    }
  }
  if (own_ != nullptr) warnIfFailed(XCCL_RT(Free)(own_), "freeing the workspace");
}

void* Workspace::base(int r) {
  XCCL_CHECK_ARG(r >= 0 && r < size_, "cuda_ipc workspace: bad rank ", r, " of ", size_);
  if (r == rank_) return own_;
  std::lock_guard<std::mutex> guard(mutex_);
  if (mapped_[r] == nullptr) mapped_[r] = mapPeerLocked(guard, r);
  return mapped_[r];
}

void* Workspace::mapPeerLocked(const std::lock_guard<std::mutex>&, int r) {
  const Record& peer = records_[r];
  const Record& me = records_[rank_];
  ScopedDevice scoped(device_);
  XCCL_IPC_CHECK(ErrorKind::kInternal, scoped.status());

  // This very process: CUDA refuses to open a process's own handle, and needs none (one address
  // space); a kernel on this device reading another device's memory needs peer access though.
  if (peer.pid == me.pid && peer.processToken == me.processToken) {
    if (peer.device != device_) {
      int canAccess = 0;
      XCCL_IPC_CHECK(ErrorKind::kInternal,
                     XCCL_RT(DeviceCanAccessPeer)(&canAccess, device_, peer.device));
      if (!canAccess) {
        XCCL_THROW(kIpcUnavailable, "cuda_ipc: rank ", rank_, " on ", describe(me),
                   " has no peer access to rank ", r, " on ", describe(peer));
      }
      const gpuError_t rc = XCCL_RT(DeviceEnablePeerAccess)(peer.device, 0);
      if (rc == XCCL_RT(ErrorPeerAccessAlreadyEnabled)) {
        (void)gpuGetLastError();  // enabled by an earlier workspace or by the caller: fine
      } else {
        XCCL_IPC_CHECK(kIpcUnavailable, rc);
      }
    }
    return reinterpret_cast<void*>(static_cast<uintptr_t>(peer.address));
  }

  XCCL_RT(IpcMemHandle_t) handle;
  std::memcpy(&handle, peer.handle.data(), kIpcHandleBytes);
  void* mapped = nullptr;
  const gpuError_t rc =
      XCCL_RT(IpcOpenMemHandle)(&mapped, handle, XCCL_RT(IpcMemLazyEnablePeerAccess));
  if (rc != gpuSuccess) {
    (void)gpuGetLastError();
    XCCL_THROW(kIpcUnavailable, "cuda_ipc: rank ", rank_, " on ", describe(me),
               " cannot map rank ", r, "'s workspace on ", describe(peer),
               ": opening its IPC handle failed: ", runtimeText(rc));
  }
  opened_[r] = true;
  XCCL_DEBUG("cuda_ipc", "rank ", rank_, " mapped rank ", r, "'s workspace (", describe(peer), ")");
  return mapped;
}

}  // namespace xccl::net::cuda_ipc
