// One symmetric device allocation per rank of a group on one host: the memory the GPU collective
// kernels (kernels/launch.h) borrow through a kernels::DeviceHandle. Every rank allocates the same
// layout (layout.h) on its own device, exports a CUDA IPC handle through the store, and maps the
// peers' allocations (createAgreed: all of them before returning, and only if every rank could;
// create: lazily, on first use of base()). Ranks may share one GPU (separate processes on one
// device: IPC works there, where NCCL would refuse).
//
// CUDA_VISIBLE_DEVICES may differ between processes: the device ordinals in the published records
// then disagree, but a handle names the memory itself and cudaIpcOpenMemHandle maps it even from a
// device this process cannot see, so nothing here depends on the numbering. Records carry each
// device's PCI bus id, which names the same GPU everywhere: for messages, and for finding a peer's
// GPU among this process's to ask cudaDeviceCanAccessPeer.
//
// Lifetime: ~Workspace frees this rank's allocation while peers may still have it mapped, which
// CUDA leaves undefined. Destroy a group's workspaces only after every rank's last kernel using
// them has finished (e.g. after a store barrier at shutdown), never from a failed rank while the
// others still run.
//
// Built only when XCCL_WITH_CUDA is 1 (the header itself needs no CUDA). Host code only: the CUDA
// or HIP runtime API through common/gpu_runtime.h, compiled by the C++ compiler (on ROCm the
// flag area is an uncached allocation of its own, see allocateFlagArea() in runtime.h). The names
// say CUDA IPC; HIP's IPC handles work the same way.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/regions/cuda_ipc/layout.h"
#include "net/regions/cuda_ipc/record.h"
#include "net/rendezvous/store.h"

namespace xccl::net::cuda_ipc {

class Workspace {
 public:
  // Test seam for createAgreed (tests/cpp/gpu/test_cuda_ipc.cc): called for each peer after this
  // rank's real checks of that peer passed; a non-empty answer counts as that check failing with
  // this text. Lets a test make one rank vote "no" on a machine where IPC works. Null in
  // production.
  using PeerCheckHook = std::function<std::string(int peer)>;

  // The entry point for groups: collective, every rank calls it with equal prefix, attempt, size
  // and dataBytes, and every rank gets the same outcome. Either every rank returns its workspace,
  // each having mapped every peer, or every rank returns nullptr with the same *whyNot naming
  // the ranks that could not take part and why (the caller then warns once and takes the vendor
  // route). Steps, each ending in one all-gather through the store, keys under
  // attemptKeys(prefix, attempt) so a retry (the caller counts attempts alike on every rank)
  // never reads an earlier attempt's records:
  //  1. allocate, zero and export (as create()); publish the record, or why this rank could not
  //     (out of memory and every other CUDA failure are a "no", never an exception that leaves
  //     the peers waiting); gather every rank's. Any failed record: all return nullptr.
  //  2. check every peer: cudaDeviceCanAccessPeer when the peer's GPU is visible here and is not
  //     this rank's, then a trial mapping (base(r)) and a 4-byte read of its zeroed flags, then
  //     `hook`; vote this rank's objections ("" for none). Any objection: all return nullptr.
  // Release after a "no" (the rule that keeps a peer from mapping freed memory): nobody maps
  // before step 1 succeeded everywhere, so after a failed step 1 each rank frees its allocation
  // at once. After a failed vote each rank first closes the mappings it opened, publishes that
  // (attemptKeys().released), and frees its allocation only once every rank has; a rank that
  // does not publish within the timeout leaves the others' allocations unfreed until exit.
  // *whyNot is written only when returning nullptr. A bad device on one rank is that rank's "no".
  // Throws kInvalidArgument, alike on every rank, for bad arguments (size, rank, attempt,
  // whyNot == nullptr) and for unequal dataBytes; kTimeout, on the ranks that waited, naming the
  // ranks that did not publish a step within `timeout` (all steps together); this rank's
  // allocation is then kept until exit, since a peer may have mapped it.
  static std::unique_ptr<Workspace> createAgreed(Store& store, const std::string& prefix,
                                                 int attempt, int rank, int size, int device,
                                                 size_t dataBytes,
                                                 std::chrono::milliseconds timeout,
                                                 std::string* whyNot,
                                                 const PeerCheckHook& hook = nullptr);

  // Step 1 of createAgreed alone, under `prefix` itself (no attempts, no peer checks: peers are
  // mapped on first use of base()), throwing instead of returning nullptr. Kept for callers that
  // want an exception and map lazily. Every rank calls it with equal size, dataBytes and prefix.
  // Allocates layoutFor(dataBytes) on `device` (made current for the call, then the caller's
  // device is restored), zeroes flags, epochs and error word and waits for that, then publishes
  // its record under `prefix`/<rank> and waits (bounded by `timeout` in all) for every rank's.
  // Throws (the same kind on every rank when one rank fails after validating its arguments):
  //  - kInvalidArgument: size > kernels::kMaxRanks, a bad rank or device, unequal dataBytes;
  //  - kSystem: CUDA IPC is not possible here (cudaIpcGetMemHandle failed), with the CUDA error;
  //  - kTimeout: some ranks never published (the message names them); this rank's allocation
  //    is then kept until exit, since a peer that got every record may have mapped it;
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
  // Rank r's kernels::FlagArea as mapped in this process (maps rank r as base(r) does). The
  // flag area is part of the allocation on CUDA and an allocation of its own on ROCm (runtime.h).
  void* flags(int r);
  uint32_t* epochs() { return flagPart(layout_.epochsOffset); }
  uint32_t* error() { return flagPart(layout_.errorOffset); }

 private:
  // What step 1 leaves: every rank's record (failed ones say why) and, when this rank succeeded,
  // its workspace (records_ not yet set); `failure` is this rank's own exception, if any.
  struct Published {
    std::unique_ptr<Workspace> workspace;
    std::vector<Record> records;
    std::exception_ptr failure;
  };
  using Deadline = std::chrono::steady_clock::time_point;

  Workspace(int rank, int size, int device, const WorkspaceLayout& layout);
  static Published publish(Store& store, const std::string& recordsKey, int rank, int size,
                           int device, size_t dataBytes, Deadline deadline);
  void adopt(std::vector<Record> records);  // keeps the records, ready for base()
  std::string checkPeers(const PeerCheckHook& hook);  // step 2: "" or this rank's objections
  // One peer's checks; `stream` is a gpuStream_t (this header includes no runtime header).
  std::string checkPeer(int r, void* stream);
  void closePeerMappings();  // base(r) of a peer must not be called after this
  void abandon();  // closes the mappings and keeps own_ until exit (a peer may map it)
  void* mapPeerLocked(const std::lock_guard<std::mutex>& guard, int r);
  // This rank's flag area part at layout offset `offset` (>= flagsOffset).
  uint32_t* flagPart(size_t offset) {
    return reinterpret_cast<uint32_t*>(ownFlags_ + (offset - layout_.flagsOffset));
  }

  const int rank_;
  const int size_;
  const int device_;
  const WorkspaceLayout layout_;
  char* own_ = nullptr;  // this rank's allocation on device_ (allocateData() in runtime.h)
  char* ownFlags_ = nullptr;  // its flag area: inside own_, or apart (kFlagAreaApart)
  std::vector<Record> records_;  // every rank's, from step 1
  std::mutex mutex_;  // guards the two vectors below
  std::vector<void*> mapped_;  // base(r) once resolved; nullptr before
  std::vector<void*> mappedFlags_;  // flags(r), resolved with mapped_[r]
  std::vector<bool> opened_;  // mapped_[r] (and apart, mappedFlags_[r]) came from
                              // cudaIpcOpenMemHandle: close them
};

}  // namespace xccl::net::cuda_ipc
