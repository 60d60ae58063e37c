// ChildGroups: the groups this one makes, split() (a new group of some members) and shrink()
// (a new group of the survivors; docs/p2p.md, "Dynamic membership"). A child is a
// ProcessGroupXccl of its own, created with its parent's options unless the caller gives others
// (and its parent's policy when those carry none), through the store under a prefix that names
// it alike on all its members: each member counts the children it made so far.
//
// One reason to change: how a child is named and created. Threads: any; splitMutex_ guards
// splitCounts_; shrinks_ is counted under the lifecycle's lock (MembershipLifecycle::serialise),
// which shrink() holds throughout, as reconfigure() does.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "backend/core/group_core.h"
#include "backend/process_group_lifecycle.h"
#include "backend/process_group_options.h"

namespace xccl::backend {

class ChildGroups {
 public:
  // Reads `core`'s membership and serialises shrink() with `lifecycle`, which must outlive
  // this; copies `options` (the face's) into each child's.
  ChildGroups(GroupCore& core, MembershipLifecycle& lifecycle,
              c10::intrusive_ptr<GroupOptions> options)
      : core_(core), lifecycle_(lifecycle), options_(std::move(options)) {}
  ChildGroups(const ChildGroups&) = delete;
  ChildGroups& operator=(const ChildGroups&) = delete;

  // c10d's split(): the child of `ranks` (this group's ranks) through `store`; null on a rank
  // not in `ranks`. Collective over `ranks`.
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts);
  // c10d's shrink(): the child of every rank but `ranksToExclude`, through this membership's
  // store; torch's SHRINK_ABORT in `shrinkFlags` aborts this group first. Collective over the
  // survivors.
  c10::intrusive_ptr<c10d::Backend> shrink(
      const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
      const c10::intrusive_ptr<c10d::Backend::Options>& optsOverride);

 private:
  GroupCore& core_;
  MembershipLifecycle& lifecycle_;
  const c10::intrusive_ptr<GroupOptions> options_;

  std::mutex splitMutex_;
  // split(): how many children each member list got so far (names their store prefix).
  std::map<std::vector<int>, int> splitCounts_;
  int shrinks_ = 0;  // shrink() calls so far (names the child's store prefix)
};

}  // namespace xccl::backend
