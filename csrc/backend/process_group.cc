#include "backend/process_group.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>

#include "backend/core/gil.h"
#include "backend/core/store_adapter.h"
#include "backend/core/torch_error.h"
#include "common/env.h"
#include "common/logging.h"
#include "net/rendezvous/incarnation.h"

namespace xccl::backend {
namespace {

// The group's store moved under this creation's own scope (net/rendezvous/incarnation.h), so that
// nothing an earlier attempt or creation left in the store is ever read. Collective: the creation's
// first exchange. Members of a reconfigurable group create it at different times (a newcomer joins
// later), so they share the launcher's scope only; reconfigure uuids scope their memberships.
c10::intrusive_ptr<c10d::Store> enterIncarnation(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int size, bool reconfigurable,
                                                 std::chrono::milliseconds timeout) {
  const std::string scope = net::launcherScopeFromEnvironment();
  net::Incarnation incarnation = net::sharedIncarnation(scope);
  if (!reconfigurable) {
    StoreAdapter adapter(store, "");
    incarnation = net::newIncarnation(adapter, scope, rank, size, timeout);
  }
  XCCL_DEBUG("backend", "group keys under '", incarnation.prefix, "'");
  return c10::make_intrusive<IncarnationStore>(incarnation.prefix, store,
                                               incarnation.token != 0 ? incarnation.tag() : "");
}

}  // namespace

ProcessGroupXccl::ProcessGroupXccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   c10::intrusive_ptr<Options> options)
    : c10d::Backend(rank, size), options_(std::move(options)) {
  TORCH_CHECK_VALUE(options_, "xccl: options must not be None");
  core_ = std::make_unique<GroupCore>(*this, options_, store, rank, size, options_->policy);
  TORCH_CHECK_VALUE(size >= 1 && rank >= 0 && rank < size, "xccl: bad rank ", rank,
                    " for group size ", size);
  try {
    log::setRankOnce(rank);  // the first group created is normally the world
    // A typo in any XCCL_* variable is a ValueError here, not a failure at first use.
    env::checkAll();
    algo::Tunables tunables = algo::Tunables::fromEnvironment();
    if (!options_->algorithm.empty()) tunables.forced = algo::parseAlgorithm(options_->algorithm);
    core_->membership().setTunables(tunables);
    bool reconfigurable = false;
#if XCCL_TORCH_HAS_RECONFIGURE
    reconfigurable = options_->enable_reconfigure;
#endif
    core_->membership().setGroupStore(
        enterIncarnation(store, rank, size, reconfigurable, setupTimeout()));
    StoreAdapter adapter(core_->membership().groupStore(), "xccl/");
    // A group created for reconfigure connects nothing: reconfigure() forms its membership.
    if (!startUnconnected(adapter)) connectMembership(adapter, setupTimeout());
  } catch (const Error& e) {
    throwTorchError(e.kind(), e.what());
  }
  core_->recorder().describe();  // a dump names this rank's file even before its first operation
  init();
  if (!handle_.empty()) {
    XCCL_INFO("backend", "group '", options_->group_name,
              "' created for reconfigure: no members until torch.distributed._reconfigure");
    return;
  }
  XCCL_INFO("backend", "group '", options_->group_name, "' rank ", rank, " of ", size,
            " ready (collectives over ", transportName(), ", messages to peers over ",
            core_->membership().peerTransportName(), ")");
}

std::chrono::milliseconds ProcessGroupXccl::setupTimeout() const {
  // Building a membership (settings agreement, TCP mesh) waits for every rank: bounded by
  // XCCL_CONNECT_TIMEOUT_MS when set, else by the group timeout.
  return env::getString("XCCL_CONNECT_TIMEOUT_MS").empty()
             ? timeout()
             : std::chrono::milliseconds(env::getInt("XCCL_CONNECT_TIMEOUT_MS"));
}

void ProcessGroupXccl::connectMembership(net::Store& store, std::chrono::milliseconds timeout) {
  GroupCore::ConnectOptions connect;
  connect.algorithm = options_->algorithm;
  connect.storeHost = options_->storeHost;
  // A membership that reconfigure() may replace lends no pool tensors: they would outlive it.
  connect.lendsPool = handle_.empty();
  core_->connect(store, timeout, connect);
  cpu_ = std::make_unique<CpuSide>(*core_);
}

ProcessGroupXccl::~ProcessGroupXccl() { shutdown(); }

void ProcessGroupXccl::setTimeout(std::chrono::milliseconds timeout) {
  core_->sequencer().setTimeout(timeout);
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupXccl::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  auto it = std::find(ranks.begin(), ranks.end(), core_->membership().rank());
  if (it == ranks.end()) return nullptr;
  auto childOptions = c10::make_intrusive<Options>(*options_);
  if (auto* given = dynamic_cast<Options*>(opts.get())) {
    childOptions = c10::make_intrusive<Options>(*given);
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

void ProcessGroupXccl::abort() {
  core_->markBroken("abort() was called on rank " + std::to_string(core_->membership().rank()));
  abortGpu();
}

void ProcessGroupXccl::shutdown() {
  if (core_->failure().markShutDown()) dropMembership("");
}

void ProcessGroupXccl::dropMembership(const std::string& reason) {
  core_->stopMembership(reason);
  GilReleasedIfHeld noGil;  // as in stopMembership: the GPU side and the joins wait for threads
  {
    std::lock_guard<std::mutex> guard(gpuMutex_);
    if (gpu_) {
      gpu_->shutdown(std::min<std::chrono::milliseconds>(core_->sequencer().timeout(),
                                                         std::chrono::seconds(30)));
    }
    gpu_.reset();
  }
  core_->releaseMembership();
}

#if XCCL_TORCH_HAS_ABORT_HOOK
void ProcessGroupXccl::registerAbortHook(int64_t hookId, c10d::AbortHook hook) {
  core_->abortHooks().add(hookId, std::move(hook));
}

void ProcessGroupXccl::unregisterAbortHook(int64_t hookId) { core_->abortHooks().remove(hookId); }
#endif

}  // namespace xccl::backend
