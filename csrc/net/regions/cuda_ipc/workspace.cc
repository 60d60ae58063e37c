#include "net/regions/cuda_ipc/workspace.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "common/gpu_limits.h"
#include "common/gpu_runtime.h"
#include "common/logging.h"
#include "net/regions/cuda_ipc/runtime.h"
#include "net/rendezvous/bootstrap.h"

namespace xccl::net::cuda_ipc {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

static_assert(sizeof(XCCL_RT(IpcMemHandle_t)) == kIpcHandleBytes, "record.h carries the handle");

// What create() and base() throw when CUDA IPC cannot work here (see workspace.h). common/error.h
// has no kind for "transport unavailable, fall back" yet; one constant to change when it does.
constexpr ErrorKind kIpcUnavailable = ErrorKind::kSystem;

// Random once per process (see Record::processToken).
uint64_t processToken() {
  static const uint64_t token = randomToken();
  return token;
}

// The group's exchanges of one creation, all ending by `deadline`. Keys are full store keys.
Bootstrap exchangesUntil(Store& store, int rank, int size, Deadline deadline) {
  return Bootstrap(store, "", rank, size, milliseconds(0)).until(deadline);
}

std::string describe(const Record& record) {
  return detail::concat("device ", record.device, " (bus ", record.busId, "), pid ", record.pid);
}

std::string reasonOf(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace

Workspace::Workspace(int rank, int size, int device, const WorkspaceLayout& layout)
    : rank_(rank), size_(size), device_(device), layout_(layout) {}

Workspace::Published Workspace::publish(Store& store, const std::string& recordsKey, int rank,
                                        int size, int device, size_t dataBytes, Deadline deadline) {
  // Equal on every rank (a precondition), so every rank refuses alike without publishing anything.
  XCCL_CHECK_ARG(size >= 1 && size <= kGpuMaxRanks, "cuda_ipc workspace for ", size,
                 " ranks: between 1 and ", kGpuMaxRanks, " are supported");
  XCCL_CHECK_ARG(rank >= 0 && rank < size, "cuda_ipc workspace: bad rank ", rank, " of ", size);

  // From here on a failure is published instead of thrown, so the peers learn of it at once
  // rather than wait out the timeout.
  Published out;
  Record mine;
  try {
    const WorkspaceLayout layout = layoutFor(dataBytes);
    int count = 0;
    XCCL_GPU_CHECK(ErrorKind::kInternal, XCCL_RT(GetDeviceCount)(&count));
    XCCL_CHECK_ARG(device >= 0 && device < count, "cuda_ipc workspace: device ", device, " of ",
                   count, " visible CUDA devices");
    out.workspace.reset(new Workspace(rank, size, device, layout));
    ScopedDevice scoped(device);
    XCCL_GPU_CHECK(ErrorKind::kInternal, scoped.status());

    const size_t flagBytes = layout.totalBytes - layout.flagsOffset;
    void* base = nullptr;
    // Apart, the data part alone; never empty, as a zero-byte allocation has no IPC handle.
    const size_t baseBytes =
        kFlagAreaApart ? std::max(layout.flagsOffset, kPartAlignment) : layout.totalBytes;
    XCCL_GPU_CHECK(ErrorKind::kInternal, allocateData(&base, baseBytes));
    out.workspace->own_ = static_cast<char*>(base);
    void* flags = out.workspace->own_ + layout.flagsOffset;
    if (kFlagAreaApart) {
      XCCL_GPU_CHECK(ErrorKind::kInternal, allocateFlagArea(&flags, flagBytes));
    }
    out.workspace->ownFlags_ = static_cast<char*>(flags);
    // Zeroed and complete before the handle is published, hence before any peer can write a flag
    // (kernels/device_handle.h).
    ScopedStream stream;
    XCCL_GPU_CHECK(ErrorKind::kInternal, XCCL_RT(MemsetAsync)(flags, 0, flagBytes, stream.get()));
    XCCL_GPU_CHECK(ErrorKind::kInternal, XCCL_RT(StreamSynchronize)(stream.get()));

    XCCL_RT(IpcMemHandle_t) handle;
    XCCL_GPU_CHECK(kIpcUnavailable, XCCL_RT(IpcGetMemHandle)(&handle, base));
    std::memcpy(mine.handle.data(), &handle, kIpcHandleBytes);
    if (kFlagAreaApart) {
      XCCL_GPU_CHECK(kIpcUnavailable, XCCL_RT(IpcGetMemHandle)(&handle, flags));
      std::memcpy(mine.flagsHandle.data(), &handle, kIpcHandleBytes);
      mine.flagsAddress = reinterpret_cast<uintptr_t>(flags);
    }
    char busId[kMaxBusIdBytes] = {};
    XCCL_GPU_CHECK(ErrorKind::kInternal,
                   XCCL_RT(DeviceGetPCIBusId)(busId, sizeof(busId) - 1, device));
    mine.busId = busId;
    mine.address = reinterpret_cast<uintptr_t>(base);
    mine.pid = ::getpid();
    mine.processToken = processToken();
    mine.device = device;
    mine.dataBytes = dataBytes;
  } catch (...) {
    out.failure = std::current_exception();
    out.workspace.reset();  // never published: nobody can have mapped it
    mine = Record{};
    mine.failed = true;
    mine.failure = reasonOf(out.failure);
    try {
      throw;
    } catch (const Error& e) {
      mine.failureKind = e.kind();
    } catch (...) {
    }
  }

  std::vector<Bytes> published;
  try {
    published =
        exchangesUntil(store, rank, size, deadline).allGather(recordsKey, encodeRecord(mine));
  } catch (...) {
    // Peers that got every record may be mapping this allocation right now.
    if (out.workspace) out.workspace->abandon();
    throw;
  }
  for (const Bytes& bytes : published) out.records.push_back(decodeRecord(bytes));
  return out;
}

std::unique_ptr<Workspace> Workspace::create(Store& store, const std::string& prefix, int rank,
                                             int size, int device, size_t dataBytes,
                                             milliseconds timeout) {
  Published p = publish(store, prefix, rank, size, device, dataBytes, Clock::now() + timeout);
  // Every rank throws the lowest failing rank's kind: its own exception, or the peer's reason.
  for (int r = 0; r < size; ++r) {
    if (!p.records[r].failed) continue;
    if (r == rank) std::rethrow_exception(p.failure);
    XCCL_THROW(p.records[r].failureKind, "cuda_ipc workspace '", prefix, "': rank ", r,
               " could not create its part: ", p.records[r].failure);
  }
  (void)recordsVerdict(p.records);  // throws for unequal data sizes
  p.workspace->adopt(std::move(p.records));
  return std::move(p.workspace);
}

std::unique_ptr<Workspace> Workspace::createAgreed(Store& store, const std::string& prefix,
                                                   int attempt, int rank, int size, int device,
                                                   size_t dataBytes, milliseconds timeout,
                                                   std::string* whyNot, const PeerCheckHook& hook) {
  XCCL_CHECK_ARG(whyNot != nullptr, "cuda_ipc workspace: whyNot must not be null");
  const AttemptKeys keys = attemptKeys(prefix, attempt);
  const Deadline deadline = Clock::now() + timeout;
  auto refuse = [&](const std::string& verdict) {
    *whyNot = detail::concat("cuda_ipc workspace '", prefix, "' attempt ", attempt, ": ", verdict);
    if (rank == 0) XCCL_INFO("cuda_ipc", *whyNot);
    return nullptr;
  };

  // Step 1: every rank's part exists, or all refuse; nobody has mapped anything yet.
  Published p = publish(store, keys.records, rank, size, device, dataBytes, deadline);
  const std::string created = recordsVerdict(p.records);  // throws for unequal data sizes
  if (!created.empty()) return refuse(created);
  std::unique_ptr<Workspace> ws = std::move(p.workspace);
  ws->adopt(std::move(p.records));

  // Step 2: every rank checks every peer and votes; the verdict is the same bytes everywhere.
  const std::string objection = ws->checkPeers(hook);
  const Bootstrap exchanges = exchangesUntil(store, rank, size, deadline);
  std::string verdict;
  try {
    verdict = exchanges.agree(keys.votes, objection).all();
  } catch (...) {
    ws->abandon();  // peers may hold mappings of our allocation and never learn the outcome
    throw;
  }
  if (verdict.empty()) {
    if (rank == 0) {
      XCCL_INFO("cuda_ipc", "workspace '", prefix, "' attempt ", attempt, ": ", size, " ranks x ",
                ws->layout_.totalBytes, " bytes (", dataBytes, " data), every peer mapped");
    }
    return ws;
  }

  // A "no": close our mappings of the peers, and free our allocation only once every peer says
  // it closed its mapping of it.
  ws->closePeerMappings();
  try {
    (void)exchanges.allGather(keys.released, Bytes{});
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kTimeout) throw;
    XCCL_WARN("cuda_ipc", "keeping this rank's workspace until exit: ", e.what());
    ws->abandon();
  }
  ws.reset();
  return refuse(verdict);
}

Workspace::~Workspace() {
  ScopedDevice scoped(device_);
  warnIfFailed(scoped.status(), "making the workspace's device current in ~Workspace");
  closePeerMappings();
  if (kFlagAreaApart && ownFlags_ != nullptr) {
    warnIfFailed(XCCL_RT(Free)(ownFlags_), "freeing the workspace's flag area");
  }
  if (own_ != nullptr) warnIfFailed(XCCL_RT(Free)(own_), "freeing the workspace");
}

void Workspace::adopt(std::vector<Record> records) {
  records_ = std::move(records);
  mapped_.assign(size_, nullptr);
  mappedFlags_.assign(size_, nullptr);
  opened_.assign(size_, false);
  mapped_[rank_] = own_;
  mappedFlags_[rank_] = ownFlags_;
}

void Workspace::closePeerMappings() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (std::none_of(opened_.begin(), opened_.end(), [](bool opened) { return opened; })) return;
  ScopedDevice scoped(device_);  // the mappings belong to device_'s context
  warnIfFailed(scoped.status(), "making the workspace's device current to close mappings");
  for (size_t r = 0; r < opened_.size(); ++r) {
    if (!opened_[r]) continue;
    warnIfFailed(XCCL_RT(IpcCloseMemHandle)(mapped_[r]), "closing a peer's workspace mapping");
    if (kFlagAreaApart) {
      warnIfFailed(XCCL_RT(IpcCloseMemHandle)(mappedFlags_[r]),
                   "closing a peer's flag area mapping");
    }
    opened_[r] = false;
    mapped_[r] = nullptr;
    mappedFlags_[r] = nullptr;
  }
}

void Workspace::abandon() {
  closePeerMappings();
  own_ = nullptr;  // leaked on purpose; the driver reclaims it when the process exits
  ownFlags_ = nullptr;
}

std::string Workspace::checkPeers(const PeerCheckHook& hook) {
  std::string objections;
  try {
    ScopedDevice scoped(device_);
    XCCL_GPU_CHECK(ErrorKind::kInternal, scoped.status());
    ScopedStream stream;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      std::string why = checkPeer(r, stream.get());
      if (why.empty() && hook) why = hook(r);
      if (!why.empty()) objections += (objections.empty() ? "" : "; ") + why;
    }
  } catch (const std::exception& e) {
    objections += (objections.empty() ? "" : "; ") + std::string(e.what());
  }
  return objections;
}

std::string Workspace::checkPeer(int r, void* stream) {
  const Record& peer = records_[r];
  const std::string whom = detail::concat("rank ", r, " on ", describe(peer));
  // The peer's GPU as this process numbers it, if it can see it at all (the bus id names the same
  // GPU everywhere); one it cannot see is judged by the mapping alone.
  int visible = -1;
  if (XCCL_RT(DeviceGetByPCIBusId)(&visible, peer.busId.c_str()) != gpuSuccess) {
    (void)gpuGetLastError();
    visible = -1;
  }
  if (visible >= 0 && visible != device_) {
    int canAccess = 0;
    const gpuError_t rc = XCCL_RT(DeviceCanAccessPeer)(&canAccess, device_, visible);
    if (rc != gpuSuccess) {
      (void)gpuGetLastError();
      return "cudaDeviceCanAccessPeer for " + whom + " failed: " + gpuErrorText(rc);
    }
    if (!canAccess) return "no peer access from device " + std::to_string(device_) + " to " + whom;
  }
  // The trial mapping and a read through it: the peer zeroed its flags before publishing and no
  // kernel can write them before every rank has voted, so anything but zero is a wrong mapping.
  try {
    const void* flags = this->flags(r);
    uint32_t word = 1;
    const auto s = static_cast<gpuStream_t>(stream);
    XCCL_GPU_CHECK(kIpcUnavailable, XCCL_RT(MemcpyAsync)(&word, flags, sizeof(word),
                                                         XCCL_RT(MemcpyDeviceToHost), s));
    XCCL_GPU_CHECK(kIpcUnavailable, XCCL_RT(StreamSynchronize)(s));
    if (word != 0) return "reading " + whom + "'s zeroed flags through its mapping gave nonzero";
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void* Workspace::base(int r) {
  XCCL_CHECK_ARG(r >= 0 && r < size_, "cuda_ipc workspace: bad rank ", r, " of ", size_);
  if (r == rank_) return own_;
  std::lock_guard<std::mutex> guard(mutex_);
  if (mapped_[r] == nullptr) mapped_[r] = mapPeerLocked(guard, r);
  return mapped_[r];
}

void* Workspace::flags(int r) {
  XCCL_CHECK_ARG(r >= 0 && r < size_, "cuda_ipc workspace: bad rank ", r, " of ", size_);
  if (r == rank_) return ownFlags_;
  (void)base(r);  // maps both parts
  std::lock_guard<std::mutex> guard(mutex_);
  return mappedFlags_[r];
}

void* Workspace::mapPeerLocked(const std::lock_guard<std::mutex>&, int r) {
  const Record& peer = records_[r];
  const Record& me = records_[rank_];
  ScopedDevice scoped(device_);
  XCCL_GPU_CHECK(ErrorKind::kInternal, scoped.status());

  // This very process: CUDA refuses to open a process's own handle, and needs none (one address
  // space); a kernel on this device reading another device's memory needs peer access though.
  if (peer.pid == me.pid && peer.processToken == me.processToken) {
    if (peer.device != device_) {
      int canAccess = 0;
      XCCL_GPU_CHECK(ErrorKind::kInternal,
                     XCCL_RT(DeviceCanAccessPeer)(&canAccess, device_, peer.device));
      if (!canAccess) {
        XCCL_THROW(kIpcUnavailable, "cuda_ipc: rank ", rank_, " on ", describe(me),
                   " has no peer access to rank ", r, " on ", describe(peer));
      }
      const gpuError_t rc = XCCL_RT(DeviceEnablePeerAccess)(peer.device, 0);
      if (rc == XCCL_RT(ErrorPeerAccessAlreadyEnabled)) {
        (void)gpuGetLastError();  // enabled by an earlier workspace or by the caller: fine
      } else {
        XCCL_GPU_CHECK(kIpcUnavailable, rc);
      }
    }
    mappedFlags_[r] = reinterpret_cast<void*>(static_cast<uintptr_t>(
        kFlagAreaApart ? peer.flagsAddress : peer.address + layout_.flagsOffset));
    return reinterpret_cast<void*>(static_cast<uintptr_t>(peer.address));
  }

  XCCL_RT(IpcMemHandle_t) handle;
  std::memcpy(&handle, peer.handle.data(), kIpcHandleBytes);
  void* mapped = nullptr;
  const gpuError_t rc =
      XCCL_RT(IpcOpenMemHandle)(&mapped, handle, XCCL_RT(IpcMemLazyEnablePeerAccess));
  if (rc != gpuSuccess) {
    (void)gpuGetLastError();
    XCCL_THROW(kIpcUnavailable, "cuda_ipc: rank ", rank_, " on ", describe(me), " cannot map rank ",
               r, "'s workspace on ", describe(peer),
               ": opening its IPC handle failed: ", gpuErrorText(rc));
  }
  void* flags = static_cast<char*>(mapped) + layout_.flagsOffset;
  if (kFlagAreaApart) {
    std::memcpy(&handle, peer.flagsHandle.data(), kIpcHandleBytes);
    const gpuError_t flagsRc =
        XCCL_RT(IpcOpenMemHandle)(&flags, handle, XCCL_RT(IpcMemLazyEnablePeerAccess));
    if (flagsRc != gpuSuccess) {
      (void)gpuGetLastError();
      warnIfFailed(XCCL_RT(IpcCloseMemHandle)(mapped), "closing a peer's workspace mapping");
      XCCL_THROW(kIpcUnavailable, "cuda_ipc: rank ", rank_, " on ", describe(me),
                 " cannot map rank ", r, "'s flag area on ", describe(peer),
                 ": opening its IPC handle failed: ", gpuErrorText(flagsRc));
    }
  }
  mappedFlags_[r] = flags;
  opened_[r] = true;
  XCCL_DEBUG("cuda_ipc", "rank ", rank_, " mapped rank ", r, "'s workspace (", describe(peer), ")");
  return mapped;
}

}  // namespace xccl::net::cuda_ipc
