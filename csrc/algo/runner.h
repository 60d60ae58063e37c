// One collective call of a group, run the way planCpu (algo/cpu_plan.h) plans it: over the group's
// shared-memory segment (algo/shm_collectives.h) when every rank is on one host, the
// hierarchical collectives (algo/hierarchical.h) when the group spans hosts with segments per
// host, else the network algorithms (algo/collectives.h). The functions below have the names,
// signatures and semantics of algo/collective_signatures.h, overloaded on Runner, so the backend's
// collective bodies do not depend on which transport moves their bytes. Point-to-point traffic
// never comes here.
#pragma once

#include <optional>
#include <vector>

#include "algo/collectives.h"
#include "algo/context.h"
#include "algo/cpu_plan.h"
#include "algo/shm_collectives.h"
#include "net/rendezvous/group_layout.h"
#include "net/transport/hierarchy.h"

namespace xccl::algo {

struct Runner {
  Context net;  // the network (peer) transport's context, whatever engine it runs (always usable)
  net::shm::Segment* segment = nullptr;  // the group's segment; null: no shared memory
  net::shm::PeerAlive
      alive;  // liveness of peers (group ranks) for shared-memory waits; may be empty
  const net::Hierarchy* hierarchy = nullptr;  // per-host segments; null unless it spans hosts
  // The group's measured tuning table (algo/tuning.h), owned by the group and valid while it
  // lives; null: the rules alone.
  const TuningTable* tuning = nullptr;
  // What planCpu knows of the group: shapeOf(its layout), made once when the group was created;
  // it must agree with segment and hierarchy above (plan() checks).
  GroupShape shape;

  int rank() const { return net.rank(); }
  int size() const { return net.size(); }
  // planCpu for `collective` of `bytes` (as CpuRequest wants them: the same on every rank).
  CpuPlan plan(Collective collective, size_t bytes) const;
  // The contexts of a call planned as `plan`: over the network transport, or over the segment
  // (only with one). Their tunables carry the plan's ring chunk: the executors read it there.
  Context netContext(const CpuPlan& plan) const;
  shm::Context shmContext(const CpuPlan& plan) const;
  // A group spanning hosts: the context of this host's segment (local ranks; liveness asked by
  // group rank) for a call planned as `plan`; empty where this host has one rank.
  std::optional<shm::Context> hostContext(const CpuPlan& plan) const;
  // A group spanning hosts, on a host's leader: the context among the hosts' leaders
  // (Hierarchy::leaders()) for a call planned as `plan`.
  Context leadersContext(const CpuPlan& plan) const;
};

// The shape planCpu sees for the group of `layout`, once its locality is known (the segment or
// the hierarchy of hosts built, or neither): the one place a group's shape is worked out, read by
// the tuning agreement and every Runner of the group.
GroupShape shapeOf(const net::GroupLayout& layout);

// The i-th of several collectives run under one call (coalesced operations), as
// subCollective(const Context&, size_t) in context.h.
Runner subCollective(const Runner& runner, size_t i);

// The collectives (collective_signatures.h), run the way plan() plans each call. reduce may
// clobber a non-root rank's `data` (the network algorithms use it as scratch).
XCCL_COLLECTIVES(Runner)

}  // namespace xccl::algo
