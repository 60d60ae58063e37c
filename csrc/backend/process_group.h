// ProcessGroupXccl: the c10d::Backend that torch.distributed drives for backend="xccl".
//
// One object serves every device type the group was registered for, through two sides with one
// interface (side.h): each entry point picks the side once, from its tensors' device, and
// forwards (process_group_ops.cc). The CPU side (cpu_side.h) checks a collective on the caller's
// thread (ValueError, nothing sent) and hands it to the GroupCore's enqueue() (group_core.h), which
// gives it the next sequence number and runs it on the Executor over the group's transports: a
// shared-memory segment when every rank is on one host, segments per host plus the network
// between hosts for groups spanning hosts, else the network; algo::Runner runs what
// algo::planCpu plans per call (algo/cpu_plan.h). Point-to-point goes over the transport
// net::createTransport picked per peer (net/transport/factory.h). The GPU side (gpu_side.h),
// created by the first call on CUDA tensors, runs kernels or the vendor library, or calls the CPU
// side with host copies. A communication failure or timeout aborts the TCP transport, which tells
// every peer (their shared-memory waits see it through peerAlive), and leaves this group unusable
// (like NCCL); argument errors leave it usable.
//
// This class is the c10d face: it holds the overrides c10d requires, each a forward to the part
// that owns its business, and the parts, each a class with one reason to change:
//   Sides (process_group_sides.h): the CPU side, the GPU side created on the first CUDA call,
//     picking the side per call, coalesced batches across both.
//   MembershipLifecycle (process_group_lifecycle.h): creating the group, connecting each
//     membership (at creation; with enable_reconfigure only when reconfigure() forms one, and
//     again at each reconfigure), shutdown and abort.
//   ChildGroups (process_group_children.h): split() and shrink(), their children's options and
//     store prefixes.
//   TensorAllocator (process_group_allocator.h): tensors from the shared-memory pool and the
//     memory statistics.
// The engine under them all is the GroupCore; windows are XcclWindow's (process_group_window.cc
// only creates them).
//
// The backend's rooms, lowest first (each folder's README.md; docs/design.md): recorder/ ->
// core/ -> cpu/, gpu/, window/ -> this folder, the face (process_group*, module*). A room
// includes only the rooms below it, as its include root enforces (csrc/backend/CMakeLists.txt);
// only the face sees every room, and nothing but the face includes this header.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>
#include <optional>
#include <unordered_map>

#include "backend/core/compat.h"
#include "backend/core/gpu_side.h"
#include "backend/core/group_core.h"
#include "backend/cpu/cpu_side.h"
#include "backend/process_group_allocator.h"
#include "backend/process_group_children.h"
#include "backend/process_group_lifecycle.h"
#include "backend/process_group_options.h"
#include "backend/process_group_sides.h"

namespace xccl::backend {

class ProcessGroupXccl : public c10d::Backend {
 public:
  using Options = GroupOptions;  // process_group_options.h

  ProcessGroupXccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   c10::intrusive_ptr<Options> options);
  ~ProcessGroupXccl() override { shutdown(); }

  const std::string getBackendName() const override { return "xccl"; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override { return options_; }
  bool supportsSplitting() const override { return true; }
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override {
    core_->sequencer().setTimeout(timeout);
  }
  void setSequenceNumberForGroup() override {}  // sequence numbers start at 0 on every rank
  uint64_t getSequenceNumberForGroup() override { return core_->sequencer().sequenceNumber(); }
  c10::intrusive_ptr<c10d::Backend> split(
      const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
      const c10::intrusive_ptr<c10d::Backend::Options>& opts) override {
    return children_.split(store, ranks, opts);
  }
  void abort() override { lifecycle_.abort(); }
  void shutdown() override { lifecycle_.shutdown(); }
  // Dynamic membership (docs/p2p.md): shrink() builds a new group of the survivors
  // (ChildGroups); reconfigure() replaces this group's membership in place (MembershipLifecycle).
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(
      const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
      const c10::intrusive_ptr<c10d::Backend::Options>& optsOverride) override {
    return children_.shrink(ranksToExclude, shrinkFlags, optsOverride);
  }
#if XCCL_TORCH_HAS_RECONFIGURE
  bool supportsReconfigure() const override { return true; }
  c10d::ReconfigureHandle get_reconfigure_handle() const override { return lifecycle_.handle(); }
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions& opts) override;
#endif
#if XCCL_TORCH_HAS_ABORT_HOOK
  // Hooks run before the group fails (a timeout, an error, abort()); see GroupCore::markBroken().
  void registerAbortHook(int64_t hookId, c10d::AbortHook hook) override {
    core_->abortHooks().add(hookId, std::move(hook));
  }
  void unregisterAbortHook(int64_t hookId) override { core_->abortHooks().remove(hookId); }
#endif
  // The name this rank's shared-memory segment had (already unlinked; the host's segment in a
  // hierarchical group); empty without one.
  std::string shmSegmentName() const { return core_->membership().shmSegmentName(); }
  // How the group's collectives travel: "shm" (one host), "hierarchical" (segments per host
  // and the network between them) or "tcp" (the network alone, whichever engine XCCL_NET picked).
  const char* transportName() const { return core_->membership().transportName(); }
  // What carries messages to peers (net/transport/factory.h): "shm" (every rank on this host),
  // "shm+tcp" (shared memory to this host's ranks, XCCL_NET's engine to the others), "tcp" or
  // "ofi".
  const char* peerTransportName() const { return core_->membership().peerTransportName(); }
  // The group's tunables (algo/tunables.h), read once at creation; every plan uses them.
  const algo::Tunables& tunables() const { return core_->membership().tunables(); }
  // (the tuning table's canonical text the group plans from or "", why): GroupCore's.
  std::pair<std::string, std::string> tuningInForce() const {
    return core_->membership().tuningInForce();
  }
  std::chrono::milliseconds timeout() const { return core_->sequencer().timeout(); }
  // The GPU side's calls per route (gpu_side.h); all zero before its first CUDA call.
  GpuRouteCounts gpuRouteCounts() { return sides_.gpuRouteCounts(); }

  // Collectives and point-to-point: each forwards to the side its tensors pick (Sides::on();
  // process_group_ops.cc).
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
#if XCCL_TORCH_HAS_GATHER_INTO_TENSOR
  c10::intrusive_ptr<c10d::Work> gather_into_tensor(at::Tensor& output, at::Tensor& input,
                                                    const c10d::GatherOptions& opts) override;
#endif
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  // CPU only (cpu_side.h): all_reduce of a sparse COO tensor (allreduce forwards those here too)
  // and torch's monitored_barrier.
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;
  // xccl.hooks' one-call compressed all_reduce of a CPU tensor (cpu_side.h).
  c10::intrusive_ptr<c10d::Work> compressedAllreduce(const at::Tensor& tensor, at::ScalarType wire,
                                                     bool betweenHostsOnly) {
    return sides_.cpu().compressedAllreduce(tensor, wire, betweenHostsOnly);
  }
  // Coalesced batches across both sides (Sides; core/group_core_batch.cc).
  void startCoalescing() override { sides_.startCoalescing(); }
  c10::intrusive_ptr<c10d::Work> endCoalescing() override { return sides_.endCoalescing(); }

  // Tensors in this rank's pool of the group's shared-memory segment, which the shm all_gather
  // and reduce_scatter read in place (TensorAllocator): CPU only; ordinary memory when the pool
  // is absent or full. memoryStats(): pool use, fallbacks, bytes staged vs read in place.
  bool supportsTensorAlloc(c10::DeviceIndex deviceIdx) override {
    return allocator_.supports(deviceIdx);
  }
  std::shared_ptr<c10::Allocator> getMemAllocator() override { return allocator_.get(); }
  at::Tensor allocateTensor(long size, at::TensorOptions options = {}) override {
    return allocator_.allocate(size, options);
  }
  std::unordered_map<std::string, uint64_t> memoryStats() { return allocator_.stats(); }
#if XCCL_TORCH_HAS_MEMORY_STATS
  std::unordered_map<std::string, uint64_t> getMemoryStats() override { return memoryStats(); }
#endif
#if XCCL_TORCH_HAS_WINDOW
  // One-sided windows on CPU tensors (window.h; process_group_window.cc). new_window is
  // collective, like tensor_register.
  bool supportsWindow() const override { return true; }
  c10::intrusive_ptr<c10d::Window> new_window(
      const std::optional<at::Tensor>& tensor = std::nullopt) override;
#endif

 private:
  // Declaration order is construction order, destruction order reversed (and the destructor's
  // shutdown() ends the membership before any of them goes). The core is built first and
  // destroyed last: every part holds a reference to it. The sides come next (inside them the GPU
  // side, which calls the CPU side, is declared after it and so destroyed first); the lifecycle
  // drives the sides and the children hold the lifecycle (its lock, abort()), so each is declared
  // after what it holds. The allocator is last, as before the split: nothing holds it, and its
  // pool leases keep the pool's mapping on their own.
  c10::intrusive_ptr<Options> options_;
  std::unique_ptr<GroupCore> core_;
  Sides sides_;
  MembershipLifecycle lifecycle_;
  ChildGroups children_;
  TensorAllocator allocator_;
};

}  // namespace xccl::backend
