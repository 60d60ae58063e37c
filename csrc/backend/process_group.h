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
// (like NCCL); argument errors leave it usable. Everything that depends on the membership (rank,
// size, the transports, the segment, the sides, the sequence numbers) is built by
// connectMembership(); a group created with enable_reconfigure builds it only when reconfigure()
// forms a membership, and rebuilds it at each reconfigure (process_group_reconfigure.cc). This
// class is the c10d face: it picks a side per call and owns what only c10d asks for (split, shrink,
// reconfigure, the allocator); the engine is the GroupCore.
//
// The backend's rooms, lowest first (each folder's README.md; docs/design.md): recorder/ ->
// core/ -> cpu/, gpu/, window/ -> this folder, the face (process_group*, module*). A room
// includes only the rooms below it, as its include root enforces (csrc/backend/CMakeLists.txt);
// only the face sees every room, and nothing but the face includes this header.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include "backend/core/compat.h"
#include "backend/core/gpu_side.h"
#include "backend/core/group_core.h"
#include "backend/cpu/cpu_side.h"
#include "net/rendezvous/store.h"

namespace xccl::backend {

class ProcessGroupXccl : public c10d::Backend {
 public:
  struct Options : c10d::Backend::Options {
    Options() : c10d::Backend::Options("xccl") {}
    // Overrides XCCL_ALGO for this group: "" (use XCCL_ALGO), auto, direct, ring.
    std::string algorithm;
    // Address whose route picks the interface to listen on (the store's host).
    std::string storeHost;
    // What the group calls back into its creator for (core/group_policy.h); null: none.
    // split() and shrink() give a child without one its parent's.
    std::shared_ptr<const GroupPolicy> policy;
#if XCCL_TORCH_HAS_OPTIONS_CLONE
    c10::intrusive_ptr<c10d::Backend::Options> clone() const override {
      return c10::make_intrusive<Options>(*this);
    }
#endif
  };

  ProcessGroupXccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   c10::intrusive_ptr<Options> options);
  ~ProcessGroupXccl() override;

  const std::string getBackendName() const override { return "xccl"; }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override { return options_; }
  bool supportsSplitting() const override { return true; }
  bool supportsCoalescing() const override { return true; }
  void setTimeout(std::chrono::milliseconds timeout) override;
  void setSequenceNumberForGroup() override {}  // sequence numbers start at 0 on every rank
  uint64_t getSequenceNumberForGroup() override { return core_->sequencer().sequenceNumber(); }
  c10::intrusive_ptr<c10d::Backend> split(
      const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
      const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;
  void abort() override;
  void shutdown() override;
  // Dynamic membership (process_group_reconfigure.cc; docs/p2p.md): shrink() builds a new group
  // of the survivors; reconfigure() replaces this group's membership in place.
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(
      const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
      const c10::intrusive_ptr<c10d::Backend::Options>& optsOverride) override;
#if XCCL_TORCH_HAS_RECONFIGURE
  bool supportsReconfigure() const override { return true; }
  c10d::ReconfigureHandle get_reconfigure_handle() const override;
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions& opts) override;
#endif
#if XCCL_TORCH_HAS_ABORT_HOOK
  // Hooks run before the group fails (a timeout, an error, abort()); see GroupCore::markBroken().
  void registerAbortHook(int64_t hookId, c10d::AbortHook hook) override;
  void unregisterAbortHook(int64_t hookId) override;
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
  GpuRouteCounts gpuRouteCounts();

  // Collectives and point-to-point: each forwards to side() (process_group_ops.cc).
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
    return cpu_->compressedAllreduce(tensor, wire, betweenHostsOnly);
  }
  // Coalesced batches (core/group_core_batch.cc; the GPU side joins them in process_group_gpu.cc).
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // Tensors in this rank's pool of the group's shared-memory segment, which the shm all_gather
  // and reduce_scatter read in place (process_group_alloc.cc): CPU only; ordinary memory when
  // the pool is absent or full. memoryStats(): pool use, fallbacks, bytes staged vs read in place.
  bool supportsTensorAlloc(c10::DeviceIndex deviceIdx) override;
  std::shared_ptr<c10::Allocator> getMemAllocator() override;
  at::Tensor allocateTensor(long size, at::TensorOptions options = {}) override;
  std::unordered_map<std::string, uint64_t> memoryStats();
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
  // Builds what depends on the membership (rank, size): the core's executor, transports and
  // shared memory, and the CPU side, through `store` (keys unique to this membership).
  // Collective over the members; the constructor's and reconfigure()'s.
  void connectMembership(net::Store& store, std::chrono::milliseconds setupTimeout);
  std::chrono::milliseconds setupTimeout() const;  // XCCL_CONNECT_TIMEOUT_MS or the timeout
  // With enable_reconfigure: draws this member's handle and returns true (the constructor
  // then connects nothing); otherwise false.
  bool startUnconnected(net::Store& store);
  // Ends the current membership: queued and in-flight work fails with `reason` (or is finished,
  // when `reason` is empty: shutdown), then the sides, transports and segments are torn down.
  void dropMembership(const std::string& reason);
  // Runs `call` (Side& -> Work) on the side a call on `tensors` goes to: the GPU side when any of
  // them is a CUDA tensor (gpuTensors()), else the CPU side. `opName` names the call in a refusal.
  template <typename Call>
  c10::intrusive_ptr<c10d::Work> onSide(const std::vector<at::Tensor*>& tensors, const char* opName,
                                        Call&& call);
  // The GPU side, created by the first collective on CUDA tensors (a collective step: every
  // rank's first CUDA call creates it); opens its batch when the call starts a coalesced one.
  GpuSide& gpu(const std::vector<at::Tensor*>& tensors, const char* opName);
  static bool gpuTensors(const std::vector<at::Tensor*>& tensors);
  // abort() on the GPU side, if there is one (process_group_gpu.cc).
  void abortGpu();

  c10::intrusive_ptr<Options> options_;
  // The engine; the sides hold references to it, so it is declared (and built) first.
  std::unique_ptr<GroupCore> core_;
  // The sides. The GPU side calls the CPU side (host route): declared after it, destroyed first.
  std::unique_ptr<CpuSide> cpu_;
  std::mutex gpuMutex_;
  std::unique_ptr<GpuSide> gpu_;

  // split(): how many children each member list got so far (names their store prefix).
  std::mutex splitMutex_;
  std::map<std::vector<int>, int> splitCounts_;

  // Dynamic membership (process_group_reconfigure.cc). handle_ is empty unless the group was
  // created with enable_reconfigure; reconfigureMutex_ serialises reconfigure() and shrink().
  std::mutex reconfigureMutex_;
  std::string job_;  // the job token every member's handle carries (net/rendezvous/membership.h)
  std::string handle_;  // this member's handle, stable across reconfigures
  std::set<int64_t> usedUuids_;
  std::string membershipName_ = "initial";  // names the membership in shrink()'s store prefix
  int shrinks_ = 0;  // shrink() calls so far (names the child's store prefix)

  std::once_flag allocatorOnce_;
  std::shared_ptr<class PoolAllocator> allocator_;  // getMemAllocator(), made on first use
};

}  // namespace xccl::backend
