// GroupCore: the engine under ProcessGroupXccl, shared by the CPU side, the GPU side and windows.
//
// It owns what every operation of one group goes through, as named parts, each with one reason
// to change:
//   Membership (group_core_membership.h): rank, size, the stores, the transports and
//     shared-memory segments connect() builds, the tuning table, the membership epoch, window ids;
//     peerAlive() for shared-memory waits.
//   Sequencer (group_core_sequencer.h): sequence numbers, the Executor, the progress a peer's
//     status query reads, the group's timeout and a timeout's wording and diagnosis.
//   FailureState (group_core_failure.h): broken (and why) or shut down; checkUsable().
//   AbortHooks (abort_hooks.h): what runs, each once, before the group fails.
//   CoalescedBatch (group_core_batch.h): the batch between startCoalescing and endCoalescing.
//   RecorderLink (group_core_recorder.h): the group's flight-recorder entries.
// GroupCore wires them together and holds only what spans parts: connecting and ending a
// membership, enqueue() (a collective goes through every part), checkUsable() (the failure state,
// then the membership), markBroken() (the failure state, the hooks, the recorder's dump, the
// transport) and endCoalescing() (the batch, numbered by the sequencer). Everything else the
// sides and windows reach through the part that owns it, e.g. core.membership().rank(), so that
// each part's interface is declared once, in its own header. ProcessGroupXccl (the c10d face)
// holds one GroupCore and, in parts of its own (process_group.h), the face's business: the sides
// and picking one, the membership's life and reconfigure, split/shrink, the allocator.
//
// Threads: every method may be called from any thread unless it says otherwise (each part's
// header says its own rules). The membership and the executor change only in connect(),
// startWithoutMembers(), stopMembership(), releaseMembership() and renew(), which the face calls
// with no operation in flight on this rank.
// Locks: each part with shared state has its own (FailureState: the broken reason and shutdown;
// CoalescedBatch: the batch; Sequencer: the timeout). No invariant spans two of them: every check
// or change reads or writes one part's state (a collective checks the failure state, then adds its
// Work to the batch, in two critical sections as before), and the one step that changes several
// together, renew(), runs with no operation in flight. Holding one part's lock, nothing takes
// another's.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "algo/runner.h"
#include "algo/tuning_agree.h"
#include "backend/core/abort_hooks.h"
#include "backend/core/group_core_batch.h"
#include "backend/core/group_core_failure.h"
#include "backend/core/group_core_membership.h"
#include "backend/core/group_core_recorder.h"
#include "backend/core/group_core_sequencer.h"
#include "backend/core/group_policy.h"
#include "backend/core/work.h"

namespace xccl::backend {

class GroupCore {
 public:
  using Body = std::function<void(const algo::Runner&)>;
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;
  using ConnectOptions = Membership::ConnectOptions;

  // `face` is the c10d::Backend this core serves (its group uid and description name the group
  // to the flight recorder); `options` are its options, whose timeout setTimeout() changes;
  // `policy` is what the group asks its creator (group_policy.h; null: the empty policy).
  GroupCore(const c10d::Backend& face, c10::intrusive_ptr<c10d::Backend::Options> options,
            c10::intrusive_ptr<c10d::Store> store, int rank, int size,
            std::shared_ptr<const GroupPolicy> policy);
  GroupCore(const GroupCore&) = delete;
  GroupCore& operator=(const GroupCore&) = delete;

  // The parts.
  Membership& membership() { return membership_; }
  const Membership& membership() const { return membership_; }
  Sequencer& sequencer() { return sequencer_; }
  const Sequencer& sequencer() const { return sequencer_; }
  FailureState& failure() { return failure_; }
  const FailureState& failure() const { return failure_; }
  AbortHooks& abortHooks() { return abortHooks_; }
  CoalescedBatch& batch() { return batch_; }
  RecorderLink& recorder() { return recorder_; }

  // A membership's life. Not thread-safe: the face calls these with no operation in flight.
  // Starts the executor and builds the membership (membership().connect(): transports, shared
  // memory, tuning) through `store`, then answers peers' status queries with this rank's
  // progress. Collective over the members.
  void connect(net::Store& store, std::chrono::milliseconds timeout, const ConnectOptions& opts);
  // A group without members yet (enable_reconfigure): an executor and no transport, so every
  // call reaches checkUsable(), which says to reconfigure first.
  void startWithoutMembers() { sequencer_.start(); }
  // Ends the current membership, first half: queued and in-flight work fails with `reason` (or
  // is finished, when `reason` is empty: shutdown), and the executor stops. Call with the GIL
  // released. Then the face shuts its GPU side down and calls releaseMembership(), which tears
  // down the transports and segments.
  void stopMembership(const std::string& reason);
  void releaseMembership();
  // Starts a new membership (reconfigure): usable again, no batch open, counters back to 0,
  // rank and size new, the store scoped under `storePrefix`; membershipEpoch() grows by one.
  void renew(int rank, int size, const std::string& storePrefix);
  // The callbacks this group was created with (group_policy.h); fixed for the group's life.
  const GroupPolicy& policy() const { return *policy_; }

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

  // torch's error when the group was shut down, failed earlier (failure()), or has no members
  // yet (membership()).
  void checkUsable(const char* opName) const;
  // After a failed collective (or abort()): remembers why (failure()); the first time, logs it,
  // runs the abort hooks, dumps the flight recorder and tells the peers by aborting the
  // transport.
  void markBroken(const std::string& reason);

  // Ends the coalesced batch (batch().end()), its Work numbered after the last collective.
  WorkPtr endCoalescing();

 private:
  // After a timeout in collective `seq`: asks every peer where it is (a short bound keeps the
  // error prompt) and says which ranks never entered it and which were waiting like us.
  std::string diagnoseTimeout(uint64_t seq, std::chrono::milliseconds timeout);

  // Declaration order is destruction order reversed: the recorder link and the batch go first,
  // then the executor (its queued tasks still see the membership), then the membership, whose
  // waits read the failure state.
  const std::shared_ptr<const GroupPolicy> policy_;  // never null; the membership reads it
  FailureState failure_;
  AbortHooks abortHooks_;
  Membership membership_;
  Sequencer sequencer_;
  CoalescedBatch batch_;
  RecorderLink recorder_;
};

}  // namespace xccl::backend
