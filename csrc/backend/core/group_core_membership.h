// Membership: who a group's members are and how they reach each other (GroupCore's part;
// group_core.h): rank, size, the store, the layout (the census of hosts connect() takes once and
// every step after it reads), the transports and shared-memory segments connect()
// builds, the tuning table agreed on at connect(), the membership epoch, and the window ids
// numbered per membership. Its liveness answer for shared-memory waits (peerAlive()) reads the
// failure state: a broken group's waits end as well as a dead peer's.
//
// Threads: every method may be called from any thread unless it says otherwise. The membership
// (rank, size, store, transport, segments, tuning table) changes only in connect(), release()
// and renew(), which the face calls with no operation in flight on this rank.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "algo/cpu_plan.h"
#include "algo/tunables.h"
#include "algo/tuning_agree.h"
#include "net/regions/shm/segment.h"
#include "net/rendezvous/group_layout.h"
#include "net/transport/hierarchy.h"
#include "net/transport/transport.h"

namespace xccl::backend {

class FailureState;
struct GroupPolicy;

class Membership {
 public:
  // What connect() takes from the face's options.
  struct ConnectOptions {
    std::string algorithm;  // ProcessGroupXccl.Options.algorithm: agreed on by every rank
    std::string storeHost;  // address whose route picks the interface to listen on
    bool lendsPool = true;  // false: the segment lends no pool tensors (a reconfigurable group)
  };

  // `options` are the face's (the group's name; the timeout of the shared-memory set-up);
  // `failure` is the group's failure state, which peerAlive() and somePeerFailed() read;
  // `policy` is the group's (group_policy.h), whose tuning source connect() asks.
  Membership(c10::intrusive_ptr<c10d::Backend::Options> options,
             c10::intrusive_ptr<c10d::Store> store, int rank, int size, const FailureState& failure,
             const GroupPolicy& policy);
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // Not thread-safe: the face calls these with no operation in flight.
  // Builds the transports, shared memory and tuning table through `store` (keys unique to
  // this membership), after agreeing on the group-wide settings. Collective over the members.
  void connect(net::Store& store, std::chrono::milliseconds timeout, const ConnectOptions& opts);
  // In-flight work and posted point-to-point wake up and fail with `reason` (peers learn it as
  // well); nothing without a transport.
  void abortTransport(const std::string& reason);
  // Tears down the transports, segments and tuning table (after the executor stopped).
  void release();
  // Starts a new membership (reconfigure): rank and size new, the store scoped under
  // `storePrefix`, window ids from 0; membershipEpoch() grows by one.
  void renew(int rank, int size, const std::string& storePrefix);

  int rank() const { return rank_; }
  int size() const { return size_; }
  // 0 for the membership a group is created with, +1 at each reconfigure: what belongs to one
  // membership (a window) compares it to refuse use after the membership changed.
  uint64_t membershipEpoch() const { return membershipEpoch_.load(); }
  // new_window calls so far in this membership: names each window's store keys alike on all.
  uint64_t nextWindowId() { return ++windows_; }

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
  // The measured tuning table every plan of this membership uses (algo/tuning.h), agreed on rank
  // 0's in connect(); null without one. Valid until the next connect() or release(), which run
  // with no operation in flight.
  const algo::TuningTable* tuning() const { return tuning_.table.get(); }
  // (the canonical text planned from or "", why): for xccl._C._tuning_in_force.
  std::pair<std::string, std::string> tuningInForce() const { return {tuning_.text, tuning_.why}; }

  // Where the membership's ranks are (net/rendezvous/group_layout.h): its census of hosts, taken
  // once in connect(), and the XCCL_SHM_* options read with it; windows and the GPU side read it.
  // Valid from connect() on, until the next connect().
  const net::GroupLayout& layout() const { return layout_; }
  // The shape every plan of this membership is made for (algo::shapeOf the layout, once the
  // segments are known).
  const algo::GroupShape& shape() const { return shape_; }

  // A call's torch error when the group has no members yet (enable_reconfigure, before the first
  // reconfigure): there is no transport to run it on.
  void checkHasMembers(const char* opName) const;
  // Null until connect() and after release() (transportGone()).
  net::Transport* transport() const { return transport_.get(); }
  bool transportGone() const { return transport_ == nullptr; }
  net::shm::Segment* segment() const { return segment_.get(); }
  const net::Hierarchy* hierarchy() const { return hierarchy_.get(); }
  // peerAlive() as every shared-memory wait of this membership calls it.
  const net::shm::PeerAlive& alive() const { return alive_; }
  // The name this rank's shared-memory segment had (already unlinked; the host's segment in a
  // hierarchical group); empty without one.
  std::string shmSegmentName() const;
  // How the group's collectives travel: "shm" (one host), "hierarchical" (segments per host
  // and the network between them) or "tcp" (the network alone, whichever engine XCCL_NET picked).
  const char* transportName() const;
  // What carries messages to peers (net/transport/factory.h): "shm", "shm+tcp", "tcp" or "ofi".
  const char* peerTransportName() const { return transport_ ? transport_->name() : "none"; }

  // Answers a shared-memory wait whether `peer` is alive: throws once this group is broken or
  // aborted, or with the transport's reason once that peer failed. Cheap.
  bool peerAlive(int peer);
  // Whether the transport saw some peer fail or this group was aborted. Never blocks; for the
  // GPU side's bounded shutdown.
  bool somePeerFailed() const;

 private:
  // Builds the segment when the group can have one (group_core_shm.cc).
  void setUpSharedMemory(net::Store& store, bool lendsPool);
  // Agrees on rank 0's tuning table once the routes are known (group_core_tuning.cc).
  void setUpTuning(net::Store& store, std::chrono::milliseconds timeout);

  const c10::intrusive_ptr<c10d::Backend::Options> options_;
  const FailureState& failure_;
  const GroupPolicy& policy_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Store> membershipStore_;  // null until the first renew()
  int rank_;
  int size_;
  algo::Tunables tunables_;
  net::GroupLayout layout_;  // the membership's census (connect()), read by every step after it
  algo::GroupShape shape_;  // algo::shapeOf(layout_) once the segments are known
  std::unique_ptr<net::Transport> transport_;
  std::unique_ptr<net::shm::Segment> segment_;  // one host; null otherwise
  std::unique_ptr<net::Hierarchy> hierarchy_;  // several hosts sharing memory per host
  net::shm::PeerAlive alive_;  // peerAlive() for every shared-memory wait
  algo::TuningAgreement tuning_;  // the membership's table (null: the rules) and why
  std::atomic<uint64_t> membershipEpoch_{0};
  std::atomic<uint64_t> windows_{0};
};

}  // namespace xccl::backend
