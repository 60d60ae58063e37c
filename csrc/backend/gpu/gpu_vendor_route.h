// VendorRoute: the vendor route (a part of the GPU side, gpu_path.h): the group's inner
// ProcessGroupNCCL (RCCL on ROCm), created once where a vendor route is possible, the calls
// handed to it, its coalesced batches, and its end (shutdown, abort).
//
// The coalesced batch lives here rather than in a part of its own: a CUDA batch is an NCCL group
// on this vendor group (gpu_side.h), a call inside it is issued by run() differently (NCCL runs
// nothing before the batch ends), and ending it marks the vendor group used eagerly: every member
// of the batch reads or writes this part's state, and as two classes each would need the other.
//
// Shared state it takes (gpu_shared.h): issueMutex and the stream order (each call, the batch's
// start and end), resourceMutex (the vendor group and whether it was tried, under it), the error
// word (a batch starts only on a healthy group), the placement (ranks sharing a GPU have no
// vendor route).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>

#include "backend/gpu/gpu_shared.h"

namespace xccl::backend {

class VendorRoute {
 public:
  explicit VendorRoute(GpuShared& shared) : shared_(shared) {}
  VendorRoute(const VendorRoute&) = delete;
  VendorRoute& operator=(const VendorRoute&) = delete;

  // The vendor group, created on first use (GpuPath's constructor asks for it where a vendor
  // route is possible, so that no graph capture ever constructs it); nullptr when this torch has
  // none (warned once).
  c10d::Backend* group(const char* op);
  // Whether a vendor group exists or may still be created; with shared.resourceMutex held (the
  // route choice reads it beside the kernel session's IPC refusal, in one critical section).
  bool availableLocked() const { return !vendorTried_ || vendor_; }
  // Refuses a vendor call during capture before the vendor group ran one eagerly.
  void checkCapturable(const char* op, bool captured) const;
  // `call` on `vendor` (this part's group), in issue order with the group's other calls.
  c10::intrusive_ptr<c10d::Work> run(const char* op, c10d::Backend& vendor,
                                     const LibraryCall& call);

  // A coalesced batch (GpuSide::startCoalescing, endCoalescing, coalescing).
  void startBatch(const char* op);
  c10::intrusive_ptr<c10d::Work> endBatch();
  bool batchOpen() const { return coalescing_; }

  // NCCL's own orderly shutdown (GpuPath::shutdown, with shared.issueMutex held when it could be
  // taken): without it ~ProcessGroupNCCL aborts work still in flight. Warns instead of throwing.
  void shutdown();
  // Aborts the vendor group, if any (GpuPath::abort, after the error word's abort bit).
  void abort();

 private:
  GpuShared& shared_;
  c10::intrusive_ptr<c10d::Backend> vendor_;  // under shared.resourceMutex, as is the next
  bool vendorTried_ = false;
  std::atomic<bool> usedEagerly_{false};  // its communicator exists: capture may use it
  std::atomic<bool> coalescing_{false};  // between startBatch and endBatch
};

}  // namespace xccl::backend
