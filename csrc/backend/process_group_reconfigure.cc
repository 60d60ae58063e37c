// Dynamic membership: torch's reconfigure API (a group created with enable_reconfigure forms,
// shrinks and grows its membership in place) and shrink() (a new group of the survivors). The
// handles and the rendezvous are net/rendezvous/membership.h's; each new membership is built by
// connectMembership(), exactly as a new group would be, through the store under a prefix unique
// to it. Semantics and failures: docs/p2p.md, "Dynamic membership".
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <unordered_set>
#include <variant>

#include "backend/core/gil.h"
#include "backend/core/store_adapter.h"
#include "backend/core/torch_error.h"
#include "backend/process_group.h"
#include "common/logging.h"
#include "net/rendezvous/membership.h"
#include "topo/host.h"

namespace xccl::backend {

bool ProcessGroupXccl::startUnconnected(net::Store& store) {
#if XCCL_TORCH_HAS_RECONFIGURE
  if (!options_->enable_reconfigure) return false;
  // Every member on this store, a newcomer's included, reads the same job token.
  job_ = net::jobToken(store, "reconf/job", setupTimeout());
  handle_ = net::MemberHandle{job_, net::newMemberId(), topo::hostIdentity()}.format();
  // No transport yet: calls reach checkUsable(), which says to reconfigure first.
  core_->startWithoutMembers();
  cpu_ = std::make_unique<CpuSide>(*core_);
  return true;
#else
  (void)store;
  return false;
#endif
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupXccl::shrink(
    const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
    const c10::intrusive_ptr<c10d::Backend::Options>& optsOverride) {
  std::lock_guard<std::mutex> serial(reconfigureMutex_);
  const int rank = core_->membership().rank(), size = core_->membership().size();
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
  if (shrinkFlags & 1) abort();
  auto childOptions = c10::make_intrusive<Options>(*options_);
  if (auto* given = dynamic_cast<Options*>(optsOverride.get())) {
    childOptions = c10::make_intrusive<Options>(*given);
  } else if (optsOverride) {
    childOptions->timeout = optsOverride->timeout;
  }
  if (!childOptions->policy) childOptions->policy = options_->policy;  // as split()'s child
#if XCCL_TORCH_HAS_RECONFIGURE
  childOptions->enable_reconfigure = false;  // the child is a fixed group of the survivors
#endif
  // Only survivors write under this prefix, so the excluded (perhaps dead) ranks are never
  // waited for. Survivors shrink in the same order, which makes the count agree.
  std::string prefix = "xccl/shrink/" + membershipName_ + "/";
  for (int64_t r : ranksToExclude) prefix += std::to_string(r) + ",";
  prefix += "/" + std::to_string(shrinks_++) + "/";  // under reconfigureMutex_
  const int childRank =
      static_cast<int>(std::find(survivors.begin(), survivors.end(), rank) - survivors.begin());
  GilReleasedIfHeld noGil;  // building the child waits for the other survivors
  return c10::make_intrusive<ProcessGroupXccl>(
      c10::make_intrusive<c10d::PrefixStore>(prefix, core_->membership().groupStore()), childRank,
      static_cast<int>(survivors.size()), std::move(childOptions));
}

#if XCCL_TORCH_HAS_RECONFIGURE

c10d::ReconfigureHandle ProcessGroupXccl::get_reconfigure_handle() const {
  TORCH_CHECK(!handle_.empty(), "xccl: this group has no reconfigure handle; create it with "
                                "init_process_group(..., enable_reconfigure=True)");
  return handle_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXccl::reconfigure(const c10d::ReconfigureOptions& opts) {
  std::lock_guard<std::mutex> serial(reconfigureMutex_);
  GilReleasedIfHeld noGil;  // the rendezvous and the joins wait for other threads and processes
  const int64_t uuid = opts.uuid;
  const std::chrono::milliseconds timeout = opts.timeout.value_or(this->timeout());
  const std::string name = "reconf/" + std::to_string(uuid) + "/";
  StoreAdapter store(core_->membership().groupStore(), "xccl/" + name);
  std::vector<std::string> handles;
  int rank = -1;
  // Checks first: a refusal changes nothing and the current membership stays usable.
  try {
    XCCL_CHECK_ARG(!handle_.empty(), "reconfigure: this group was not created with "
                                     "init_process_group(..., enable_reconfigure=True)");
    XCCL_CHECK_ARG(!core_->failure().isShutDown(), "reconfigure: the process group was shut down");
    const bool ordered = std::holds_alternative<std::vector<c10d::ReconfigureHandle>>(opts.handles);
    if (ordered) {
      handles = std::get<std::vector<c10d::ReconfigureHandle>>(opts.handles);
    } else {
      const auto& set = std::get<std::unordered_set<c10d::ReconfigureHandle>>(opts.handles);
      handles.assign(set.begin(), set.end());
    }
    rank = net::checkMembership(handles, ordered, handle_, job_);
    XCCL_CHECK_ARG(usedUuids_.count(uuid) == 0, "reconfigure: uuid ", uuid,
                   " was already used by this group; pass a fresh uuid to every member");
    net::claimUuid(store, "", uuid, handles, timeout);
  } catch (const Error& e) {
    throwTorchError(e.kind(), e.what());
  }
  usedUuids_.insert(uuid);
  // The old membership's queued and in-flight work fails naming this reconfigure; then its
  // transports and segments go, and the counters restart for the new membership.
  dropMembership("xccl: the membership was superseded by reconfigure uuid " + std::to_string(uuid) +
                 " (work issued before it cannot complete)");
  rank_ = rank;
  size_ = static_cast<int>(handles.size());
  core_->renew(rank_, size_, name);
  membershipName_ = name;
  const auto began = std::chrono::steady_clock::now();
  try {
    net::awaitMembers(store, "", uuid, rank, handles, timeout);
    connectMembership(store, timeout);
  } catch (const Error& e) {
    const std::string reason =
        "xccl: reconfigure uuid " + std::to_string(uuid) + " failed on rank " +
        std::to_string(rank) + " of " + std::to_string(handles.size()) + ": " + e.what() +
        " (the group stays unusable until a reconfigure with a fresh uuid succeeds)";
    dropMembership(reason);
    throwTorchError(e.kind(), reason);
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - began);
  XCCL_INFO("backend", "reconfigure uuid ", uuid, ": rank ", rank_, " of ", size_, " in ",
            took.count(), " ms (collectives over ", transportName(), ")");
  // The membership is complete when reconfigure() returns: the Work has already succeeded.
  auto work = c10::make_intrusive<XcclWork>(rank_, c10d::OpType::UNKNOWN, "xccl:reconfigure", 0,
                                            std::vector<at::Tensor>{}, timeout);
  work->succeed();
  return work;
}

#endif  // XCCL_TORCH_HAS_RECONFIGURE

}  // namespace xccl::backend
