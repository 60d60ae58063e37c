// GroupCore: the engine under ProcessGroupXccl, shared by the CPU side, the GPU side and windows.
//
// It owns what every operation of one group goes through: the membership (rank, size, the
// transports and shared-memory segments connect() builds), the sequence numbers and the Executor
// that runs collectives in order (enqueue()), the coalesced batch being collected, the timeouts,
// and the failure state (markBroken(), checkUsable(), peerAlive()) with the abort hooks and the
// flight-recorder entries that go with it. ProcessGroupXccl (the c10d face) holds one and the
// sides; the sides and windows reach it only through this interface. The face's own business
// (picking a side, split/shrink/reconfigure, the allocator) stays in the face.
//
// Threads: every method may be called from any thread unless it says otherwise. The membership
// (rank, size, transport, segments, executor) changes only in connect()/dropMembership(), which
// the face calls with no operation in flight on this rank.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "algo/runner.h"
#include "algo/tunables.h"
#include "algo/tuning_agree.h"
#include "backend/core/executor.h"
#include "backend/core/group_policy.h"
#include "backend/core/work.h"
#include "net/hierarchy.h"
#include "net/shm/segment.h"
#include "net/transport.h"

namespace xccl::backend {

class GroupCore {
 public:
  using Body = std::function<void(const algo::Runner&)>;
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;

  // What connect() takes from the face's options.
  struct ConnectOptions {
    std::string algorithm;  // ProcessGroupXccl.Options.algorithm: agreed on by every rank
    std::string storeHost;  // address whose route picks the interface to listen on
    bool lendsPool = true;  // false: the segment lends no pool tensors (a reconfigurable group)
  };

  // `face` is the c10d::Backend this core serves (its group uid and description name the group
  // to the flight recorder); `options` are its options, whose timeout setTimeout() changes;
  // `policy` is what the group asks its creator (group_policy.h; null: the empty policy).
  GroupCore(const c10d::Backend& face, c10::intrusive_ptr<c10d::Backend::Options> options,
            c10::intrusive_ptr<c10d::Store> store, int rank, int size,
            std::shared_ptr<const GroupPolicy> policy);
  GroupCore(const GroupCore&) = delete;
  GroupCore& operator=(const GroupCore&) = delete;

  // The membership. Not thread-safe: the face calls these with no operation in flight.
  // Builds what depends on the membership (the executor, the transports and shared memory),
  // through `store` (keys unique to this membership). Collective over the members.
  void connect(net::Store& store, std::chrono::milliseconds timeout, const ConnectOptions& opts);
  // A group without members yet (enable_reconfigure): an executor and no transport, so every
  // call reaches checkUsable(), which says to reconfigure first.
  void startWithoutMembers() { executor_ = std::make_unique<Executor>(); }
  // Ends the current membership, first half: queued and in-flight work fails with `reason` (or
  // is finished, when `reason` is empty: shutdown), and the executor stops. Call with the GIL
  // released. Then the face shuts its GPU side down and calls releaseMembership(), which tears
  // down the transports and segments.
  void stopMembership(const std::string& reason);
  void releaseMembership();
  // Starts a new membership (reconfigure): usable again, counters back to 0, rank and size new,
  // the store scoped under `storePrefix`; membershipEpoch() grows by one.
  void renew(int rank, int size, const std::string& storePrefix);
  int rank() const { return rank_; }
  int size() const { return size_; }
  // 0 for the membership a group is created with, +1 at each reconfigure: what belongs to one
  // membership (a window) compares it to refuse use after the membership changed.
  uint64_t membershipEpoch() const { return membershipEpoch_.load(); }

  // The store of the current membership: the group's, or a reconfigure's under its own prefix.
  const c10::intrusive_ptr<c10d::Store>& store() const {
    return membershipStore_ ? membershipStore_ : store_;
  }
  // The group's store itself (every membership's keys go under it).
  const c10::intrusive_ptr<c10d::Store>& groupStore() const { return store_; }
  void setGroupStore(c10::intrusive_ptr<c10d::Store> store) { store_ = std::move(store); }
  // The group's tunables (algo/tunables.h), read once at creation; every plan uses them.
  const algo::Tunables& tunables() const { return tunables_; }
  void setTunables(const algo::Tunables& tunables) { tunables_ = tunables; }
  std::string groupName() const { return options_->group_name; }
  // The callbacks this group was created with (group_policy.h); fixed for the group's life.
  const GroupPolicy& policy() const { return *policy_; }
  // The measured tuning table every plan of this membership uses (algo/tuning.h), agreed on rank
  // 0's in connect(); null without one. Valid until the next connect() or releaseMembership(),
  // which run with no operation in flight.
  const algo::TuningTable* tuning() const { return tuning_.table.get(); }
  // (the canonical text planned from or "", why): for xccl._C._tuning_in_force.
  std::pair<std::string, std::string> tuningInForce() const { return {tuning_.text, tuning_.why}; }

  // Null until connect() and after shutdown (transportGone()).
  net::Transport* transport() const { return transport_.get(); }
  bool transportGone() const { return transport_ == nullptr; }
  Executor* executor() const { return executor_.get(); }
  net::shm::Segment* segment() const { return segment_.get(); }
  // The name this rank's shared-memory segment had (already unlinked; the host's segment in a
  // hierarchical group); empty without one.
  std::string shmSegmentName() const;
  // How the group's collectives travel: "shm" (one host), "hierarchical" (segments per host
  // and the network between them) or "tcp" (the network alone, whichever engine XCCL_NET picked).
  const char* transportName() const;
  // What carries messages to peers (net/factory.h): "shm", "shm+tcp", "tcp" or "ofi".
  const char* peerTransportName() const { return transport_ ? transport_->name() : "none"; }

  // Timeouts: `requested`, or the group's when it is c10d::kUnsetTimeout.
  std::chrono::milliseconds effectiveTimeout(std::chrono::milliseconds requested) const;
  std::chrono::milliseconds timeout() const { return effectiveTimeout(c10d::kUnsetTimeout); }
  void setTimeout(std::chrono::milliseconds timeout);

  // Collectives. Checks the group is usable, assigns `seqCount` consecutive sequence numbers and
  // runs `body` (on the executor) as collective `opName`; `outputs` become the future's value.
  // A body running several collectives gives the i-th the runner subCollective(runner, i).
  // The flight recorder lists `inputs` as the operation's inputs (none: it works in place,
  // its inputs are its outputs).
  WorkPtr enqueue(c10d::OpType type, const char* opName, std::vector<at::Tensor> outputs,
                  std::optional<std::vector<at::Tensor>> inputs, std::chrono::milliseconds timeout,
                  bool asyncOp, Body body, uint64_t seqCount = 1);
  WorkPtr enqueue(c10d::OpType type, const char* opName, std::vector<at::Tensor> outputs,
                  std::chrono::milliseconds timeout, bool asyncOp, Body body,
                  uint64_t seqCount = 1) {
    return enqueue(type, opName, std::move(outputs), std::nullopt, timeout, asyncOp,
                   std::move(body), seqCount);
  }
  // The sequence number of the last collective enqueued (point-to-point takes none).
  uint64_t sequenceNumber() const { return seq_.load(); }

  // Failure state. checkUsable: torch's error when the group was shut down, failed earlier, or
  // has no members yet. markBroken: after a failed collective, remember why, run the abort hooks
  // and dump the recorder (beforeAbort), and tell the peers by aborting the transport.
  void checkUsable(const char* opName) const;
  void markBroken(const std::string& reason);
  // Marks the group shut down; false when it already was.
  bool markShutDown();
  bool isShutDown() const;
  // Answers a shared-memory wait whether `peer` is alive: throws once this group is broken or
  // aborted, or with the transport's reason once that peer failed. Cheap.
  bool peerAlive(int peer);
  // Whether the transport saw some peer fail or this group was aborted. Never blocks; for the
  // GPU side's bounded shutdown.
  bool somePeerFailed() const;

  // Coalesced batches (batch_isend_irecv, torch's coalescing manager; group_core_batch.cc): a
  // batch is all CPU (its Works collected here) or all CUDA (the GPU side's vendor group runs
  // it). The GPU side is the face's: it lends the batch these callbacks.
  struct GpuBatch {
    std::function<bool()> stillOpen;  // the GPU side's coalescing(); called under the core's lock
    std::function<void()> close;  // ends an abandoned CUDA batch
    std::function<WorkPtr()> end;  // the GPU side's endCoalescing()
  };
  void setGpuBatch(GpuBatch gpuBatch);
  // Adds a CPU operation's Work to the batch when coalescing; a ValueError when the batch
  // already holds CUDA operations.
  void addToBatch(const c10::intrusive_ptr<XcclWork>& work, const char* opName);
  void startCoalescing();
  WorkPtr endCoalescing();
  // A CUDA call while coalescing: true when it opens the batch on the GPU side (the caller then
  // starts it there and reports gpuBatchOpened() or gpuBatchFailed()); a ValueError (closing
  // the batch) when the batch already holds CPU operations.
  bool joinBatchOnGpu(const char* opName);
  void gpuBatchOpened();
  void gpuBatchFailed();

  // Flight recorder (flight_recorder.h; group_core_recorder.cc): records a send or recv (peer
  // net::kAnySource: any) as started, since it is posted at once.
  uint64_t recordPointToPoint(bool isSend, int peer, const at::Tensor& tensor);
  // Names this group to the recorder (its name, description and members' global ranks).
  void describeToRecorder();
  // Abort hooks: run (each once) before the group fails.
  void registerAbortHook(int64_t hookId, std::function<void()> hook);
  void unregisterAbortHook(int64_t hookId);

  // new_window calls so far in this membership: names each window's store keys alike on all.
  uint64_t nextWindowId() { return ++windows_; }

 private:
  // After a timeout in collective `seq`: asks every peer where it is and says which ranks
  // never entered it (the ones to look at) and which were waiting like us.
  std::string diagnoseTimeout(uint64_t seq, std::chrono::milliseconds timeout);
  // What this rank answers to a peer's status query: "<entered> <completed> <op>".
  std::string statusText() const;
  // Builds the segment when the group can have one (group_core_shm.cc).
  void setUpSharedMemory(net::Store& store, bool lendsPool);
  // Agrees on rank 0's tuning table once the routes are known (group_core_tuning.cc).
  void setUpTuning(net::Store& store, std::chrono::milliseconds timeout);
  // Records a collective of `count` sequence numbers from `seq` as scheduled.
  uint64_t recordCollective(c10d::OpType type, uint64_t seq, uint64_t count,
                            const std::vector<at::Tensor>& inputs,
                            const std::vector<at::Tensor>& outputs,
                            std::chrono::milliseconds timeout);
  // Once, before the group fails (markBroken): runs the abort hooks, each once, then dumps the
  // flight recorder. Hooks' exceptions are logged, never propagated.
  void beforeAbort();
  // torch's wording for a collective that timed out (ProcessGroupNCCL's watchdog, Gloo's
  // "Timed out waiting"), ahead of xccl's own message; `ranFor` is how long it ran.
  std::string torchTimeoutWording(c10d::OpType type, uint64_t seq, std::chrono::milliseconds ranFor,
                                  std::chrono::milliseconds timeout) const;
  // Forgets a CUDA batch that the GPU side closed after refusing one of its calls (caller
  // holds stateMutex_).
  void dropClosedGpuBatchLocked();
  void addToBatchLocked(const c10::intrusive_ptr<XcclWork>& work, const char* opName);

  const c10d::Backend& face_;
  const c10::intrusive_ptr<c10d::Backend::Options> options_;
  const std::shared_ptr<const GroupPolicy> policy_;  // never null
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Store> membershipStore_;  // null until the first renew()
  int rank_;
  int size_;
  algo::Tunables tunables_;
  std::unique_ptr<net::Transport> transport_;
  std::unique_ptr<net::shm::Segment> segment_;  // one host; null otherwise
  std::unique_ptr<net::Hierarchy> hierarchy_;  // several hosts sharing memory per host
  net::shm::PeerAlive alive_;  // peerAlive() for every shared-memory wait
  std::unique_ptr<Executor> executor_;
  algo::TuningAgreement tuning_;  // the membership's table (null: the rules) and why
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> p2pSeq_{0};
  // Progress, readable from the transport's progress thread without locks.
  std::atomic<uint64_t> entered_{0};  // sequence number of the last collective started
  std::atomic<uint64_t> completed_{0};  // ... and of the last one finished (either way)
  std::atomic<const char*> enteredOp_{"none"};
  std::atomic<uint64_t> membershipEpoch_{0};
  std::atomic<uint64_t> windows_{0};

  mutable std::mutex stateMutex_;
  std::string brokenReason_;  // non-empty once a collective failed or abort() ran
  std::atomic<bool> broken_{false};  // brokenReason_ is set: read without the lock
  bool shutDown_ = false;
  // The batch (under stateMutex_): Works started between startCoalescing and endCoalescing.
  bool coalescing_ = false;
  bool gpuCoalescing_ = false;
  std::vector<c10::intrusive_ptr<XcclWork>> coalesced_;
  GpuBatch gpuBatch_;

  const size_t recorderGroupId_;
  std::atomic<bool> recorderDescribed_{false};
  std::mutex abortHooksMutex_;
  std::map<int64_t, std::function<void()>> abortHooks_;  // run (and dropped) by beforeAbort()
};

}  // namespace xccl::backend
