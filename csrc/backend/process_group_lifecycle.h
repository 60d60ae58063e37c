// MembershipLifecycle: how the group's membership begins and ends. Everything that depends on
// the membership (rank, size, the transports, the segment, the sides, the sequence numbers) is
// built by connect(): at creation, or, for a group created with enable_reconfigure, only when
// reconfigure() forms a membership, and again at each reconfigure (torch's reconfigure API;
// docs/p2p.md, "Dynamic membership"). A membership ends with shutdown(), with a reconfigure
// that supersedes it, or unusable after abort(). The handles and the rendezvous are
// net/rendezvous/membership.h's; the engine's half of each step is GroupCore's (connect,
// stopMembership, releaseMembership, renew), the sides' half is Sides' (buildCpu, shutdownGpu).
//
// One reason to change: the membership's life. Threads: create() runs in the face's
// constructor; reconfigure() holds reconfigureMutex_, which also serialises shrink()
// (process_group_children.h, through serialise()) and guards membershipName_, usedUuids_ and
// the children's shrink count. job_ and handle_ are set once, in create().
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>

#include "backend/core/compat.h"
#include "backend/core/group_core.h"
#include "backend/process_group_options.h"
#include "backend/process_group_sides.h"
#include "net/rendezvous/store.h"

namespace xccl::backend {

class MembershipLifecycle {
 public:
  // Drives `core` and `sides`, which must outlive this; reads `options` (the face's).
  MembershipLifecycle(GroupCore& core, Sides& sides, c10::intrusive_ptr<GroupOptions> options)
      : core_(core), sides_(sides), options_(std::move(options)) {}
  MembershipLifecycle(const MembershipLifecycle&) = delete;
  MembershipLifecycle& operator=(const MembershipLifecycle&) = delete;

  // The group's creation (the face's constructor): reads the environment and the tunables,
  // moves the group's store under this creation's scope, then connects the first membership, or
  // none with enable_reconfigure. Collective over the members; torch's error on failure.
  void create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size);
  // The log line of a created group (after the face's init()).
  void announce(int rank, int size) const;

  // Ends the membership for good (the face's shutdown() and destructor): work queued and in
  // flight finishes, then the sides, transports and segments go. Only the first call does so.
  void shutdown();
  // Leaves the group unusable (the face's abort(), shrink()'s SHRINK_ABORT): queued and
  // in-flight work fails, the peers are told, the GPU side's kernels return.
  void abort();

  // Holds the lock that serialises membership changes: reconfigure() and shrink().
  std::unique_lock<std::mutex> serialise() {
    return std::unique_lock<std::mutex>(reconfigureMutex_);
  }
  // Names the current membership in shrink()'s store prefix; called holding serialise()'s lock.
  const std::string& membershipNameLocked(const std::unique_lock<std::mutex>&) const {
    return membershipName_;
  }

#if XCCL_TORCH_HAS_RECONFIGURE
  // This member's handle, stable across reconfigures; a RuntimeError without enable_reconfigure.
  c10d::ReconfigureHandle handle() const;
  // Replaces the membership in place. `adopt(rank, size)` tells the face its new rank and size,
  // after the old membership was dropped and before the new one is built.
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions& opts,
                                             const std::function<void(int, int)>& adopt);
#endif

 private:
  // Builds what depends on the membership (rank, size): the core's executor, transports and
  // shared memory, and the CPU side, through `store` (keys unique to this membership).
  // Collective over the members; create()'s and reconfigure()'s.
  void connect(net::Store& store, std::chrono::milliseconds setupTimeout);
  std::chrono::milliseconds setupTimeout() const;  // XCCL_CONNECT_TIMEOUT_MS or the timeout
  // With enable_reconfigure: draws this member's handle and returns true (create() then
  // connects nothing); otherwise false.
  bool startUnconnected(net::Store& store);
  // Ends the current membership: queued and in-flight work fails with `reason` (or is finished,
  // when `reason` is empty: shutdown), then the sides, transports and segments are torn down.
  void drop(const std::string& reason);

  GroupCore& core_;
  Sides& sides_;
  const c10::intrusive_ptr<GroupOptions> options_;

  // handle_ is empty unless the group was created with enable_reconfigure.
  std::mutex reconfigureMutex_;
  std::string job_;  // the job token every member's handle carries (net/rendezvous/membership.h)
  std::string handle_;  // this member's handle, stable across reconfigures
  std::set<int64_t> usedUuids_;
  std::string membershipName_ = "initial";  // names the membership in shrink()'s store prefix
};

}  // namespace xccl::backend
