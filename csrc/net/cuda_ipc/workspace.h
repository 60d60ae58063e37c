// One symmetric device allocation per rank of a group on one host: the memory the GPU collective
// kernels (kernels/launch.h) borrow through a kernels::DeviceHandle. Every rank allocates the same
// layout (layout.h) on its own device, exports a CUDA IPC handle through the store, and maps the
// peers' allocations lazily (first use of base()). Ranks may share one GPU (separate processes on
// one device: IPC works there, where NCCL would refuse).
//
// CUDA_VISIBLE_DEVICES may differ between processes: the device ordinals in the published records
// then disagree, but a handle names the memory itself and cudaIpcOpenMemHandle maps it even from a
// device this process cannot see, so nothing here depends on the numbering. Records carry each
// device's PCI bus id for messages.
//
// Lifetime: ~Workspace frees this rank's allocation while peers may still have it mapped, which
// CUDA leaves undefined. Destroy a group's workspaces only after every rank's last kernel using
// them has finished (e.g. after a store barrier at shutdown), never from a failed rank while the
// others still run.
//
// Built only when XCCL_WITH_CUDA is 1 (the header itself needs no CUDA). Host code only: the CUDA
// or HIP runtime API through common/gpu_runtime.h, compiled by the C++ compiler (on ROCm the
// allocation is uncached memory, see allocate() in workspace.cc). The names say CUDA IPC; HIP's
// IPC handles work the same way.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/cuda_ipc/layout.h"
#include "net/cuda_ipc/record.h"
#include "net/store.h"

namespace xccl::net::cuda_ipc {

class Workspace {
 public:
  // Collective over the group: every rank calls it with equal size, dataBytes and prefix. Allocates
  // layoutFor(dataBytes) on `device` (made current for the call, then the caller's device is
  // restored), zeroes flags, epochs and error word and waits for that, then publishes its record
  // under `prefix`/<rank> and waits (bounded by `timeout` in all) for every rank's.
  // Throws (the same kind on every rank when one rank fails after validating its arguments):
  //  - kInvalidArgument: size > kernels::kMaxRanks, a bad rank or device, unequal dataBytes;
  //  - kSystem: CUDA IPC is not possible here (cudaIpcGetMemHandle failed), with the CUDA error;
  //  - kTimeout: some ranks never published (the message names them);
  //  - kInternal: any other CUDA failure (e.g. out of memory), with the CUDA error.
  static std::unique_ptr<Workspace> create(Store& store, const std::string& prefix, int rank,
                                           int size, int device, size_t dataBytes,
                                           std::chrono::milliseconds timeout);
  // Closes the peer mappings this process opened and frees this rank's allocation (see Lifetime
  // above). Never throws: failures are logged.
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  const WorkspaceLayout& layout() const { return layout_; }

  // Base of rank r's allocation as mapped in this process: the local allocation for r == rank();
  // a peer in this same process (tests: ranks as threads) is used directly, with peer access
  // enabled when it is on another device; any other peer is opened with
  // cudaIpcOpenMemHandle(cudaIpcMemLazyEnablePeerAccess) on first use and then cached. Throws
  // kInvalidArgument for r out of range, kSystem when the mapping is impossible (e.g. no peer
  // access between the two GPUs). Thread-safe.
  void* base(int r);
  void* data(int r) { return base(r); }  // the data buffer starts at offset 0
  void* flags(int r) { return static_cast<char*>(base(r)) + layout_.flagsOffset; }
  uint32_t* epochs() { return reinterpret_cast<uint32_t*>(own_ + layout_.epochsOffset); }
  uint32_t* error() { return reinterpret_cast<uint32_t*>(own_ + layout_.errorOffset); }

 private:
  Workspace(int rank, int size, int device, const WorkspaceLayout& layout);
  void* mapPeerLocked(const std::lock_guard<std::mutex>& guard, int r);

  const int rank_;
  const int size_;
  const int device_;
  const WorkspaceLayout layout_;
  char* own_ = nullptr;          // this rank's allocation on device_ (allocate() in the .cc)
  std::vector<Record> records_;  // every rank's, from create()
  std::mutex mutex_;             // guards the two vectors below
  std::vector<void*> mapped_;    // base(r) once resolved; nullptr before
  std::vector<bool> opened_;     // mapped_[r] came from cudaIpcOpenMemHandle: close it
};

}  // namespace xccl::net::cuda_ipc
