// ChildGroups (process_group_children.h): split() and shrink(), each a new ProcessGroupXccl.
#include "backend/process_group_children.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <string>

#include "backend/core/gil.h"
#include "backend/process_group.h"

namespace xccl::backend {

c10::intrusive_ptr<c10d::Backend> ChildGroups::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  auto it = std::find(ranks.begin(), ranks.end(), core_.membership().rank());
  if (it == ranks.end()) return nullptr;
  auto childOptions = c10::make_intrusive<GroupOptions>(*options_);
  if (auto* given = dynamic_cast<GroupOptions*>(opts.get())) {
    childOptions = c10::make_intrusive<GroupOptions>(*given);
  } else if (opts) {
    childOptions->timeout = opts->timeout;
    childOptions->group_name = opts->group_name;
    childOptions->global_ranks_in_group = opts->global_ranks_in_group;
  }
  // Options the caller built (pg_options) carry no policy: the child calls back what its parent
  // does.
  if (!childOptions->policy) childOptions->policy = options_->policy;
  int childRank = static_cast<int>(std::distance(ranks.begin(), it));
  // The child's keys get a prefix of their own, whatever store torch hands over: with torch
  // 2.13 a second split of one parent connected to stale addresses (connections refused, 3 of 5
  // runs of test_split_group_via_cpp_binding[4]; 0 of 5 with this prefix), so torch's splits
  // there can share keys. Every member splits in the same order, so counting the splits per
  // member list names each one alike on all its members.
  std::string prefix = "xccl/split/";
  for (int r : ranks) prefix += std::to_string(r) + ",";
  {
    std::lock_guard<std::mutex> guard(splitMutex_);
    prefix += "/" + std::to_string(splitCounts_[ranks]++) + "/";
  }
  auto childStore = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
  return c10::make_intrusive<ProcessGroupXccl>(childStore, childRank,
                                               static_cast<int>(ranks.size()),
                                               std::move(childOptions));
}

c10::intrusive_ptr<c10d::Backend> ChildGroups::shrink(
    const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
    const c10::intrusive_ptr<c10d::Backend::Options>& optsOverride) {
  // Serialised with reconfigure(): the child's prefix names the membership it shrinks.
  const std::unique_lock<std::mutex> serial = lifecycle_.serialise();
  const int rank = core_.membership().rank(), size = core_.membership().size();
  std::vector<int> survivors;
  for (int r = 0; r < size; ++r) {
    if (std::find(ranksToExclude.begin(), ranksToExclude.end(), r) == ranksToExclude.end()) {
      survivors.push_back(r);
    }
  }
  for (int64_t r : ranksToExclude) {
    TORCH_CHECK_VALUE(r >= 0 && r < size, "xccl shrink: rank ", r, " is not in this group of ",
                      size);
  }
  TORCH_CHECK_VALUE(std::find(survivors.begin(), survivors.end(), rank) != survivors.end(),
                    "xccl shrink: rank ", rank, " excludes itself; only survivors call shrink");
  // torch's SHRINK_ABORT (1): this group's work ends now instead of waiting on excluded ranks.
  if (shrinkFlags & 1) lifecycle_.abort();
  auto childOptions = c10::make_intrusive<GroupOptions>(*options_);
  if (auto* given = dynamic_cast<GroupOptions*>(optsOverride.get())) {
    childOptions = c10::make_intrusive<GroupOptions>(*given);
  } else if (optsOverride) {
    childOptions->timeout = optsOverride->timeout;
  }
  if (!childOptions->policy) childOptions->policy = options_->policy;  // as split()'s child
#if XCCL_TORCH_HAS_RECONFIGURE
  childOptions->enable_reconfigure = false;  // the child is a fixed group of the survivors
#endif
  // Only survivors write under this prefix, so the excluded (perhaps dead) ranks are never
  // waited for. Survivors shrink in the same order, which makes the count agree.
  std::string prefix = "xccl/shrink/" + lifecycle_.membershipNameLocked(serial) + "/";
  for (int64_t r : ranksToExclude) prefix += std::to_string(r) + ",";
  prefix += "/" + std::to_string(shrinks_++) + "/";  // under the lifecycle's lock
  const int childRank =
      static_cast<int>(std::find(survivors.begin(), survivors.end(), rank) - survivors.begin());
  GilReleasedIfHeld noGil;  // building the child waits for the other survivors
  return c10::make_intrusive<ProcessGroupXccl>(
      c10::make_intrusive<c10d::PrefixStore>(prefix, core_.membership().groupStore()), childRank,
      static_cast<int>(survivors.size()), std::move(childOptions));
}

}  // namespace xccl::backend
