// MembershipLifecycle (process_group_lifecycle.h): the group's creation, torch's reconfigure API
// (a group created with enable_reconfigure forms, shrinks and grows its membership in place),
// shutdown and abort. Each new membership is built by connect(), exactly as a new group's would
// be, through the store under a prefix unique to it. Semantics and failures: docs/p2p.md,
// "Dynamic membership".
#include "backend/process_group_lifecycle.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <unordered_set>
#include <variant>

#include "backend/core/gil.h"
#include "backend/core/store_adapter.h"
#include "backend/core/torch_error.h"
#include "common/env.h"
#include "common/logging.h"
#include "net/rendezvous/incarnation.h"
#include "net/rendezvous/membership.h"
#include "topo/host.h"

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

void MembershipLifecycle::create(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size) {
  try {
    log::setRankOnce(rank);  // the first group created is normally the world
    // A typo in any XCCL_* variable is a ValueError here, not a failure at first use.
    env::checkAll();
    algo::Tunables tunables = algo::Tunables::fromEnvironment();
    if (!options_->algorithm.empty()) tunables.forced = algo::parseAlgorithm(options_->algorithm);
    core_.membership().setTunables(tunables);
    bool reconfigurable = false;
#if XCCL_TORCH_HAS_RECONFIGURE
    reconfigurable = options_->enable_reconfigure;
#endif
    core_.membership().setGroupStore(
        enterIncarnation(store, rank, size, reconfigurable, setupTimeout()));
    StoreAdapter adapter(core_.membership().groupStore(), "xccl/");
    // A group created for reconfigure connects nothing: reconfigure() forms its membership.
    if (!startUnconnected(adapter)) connect(adapter, setupTimeout());
  } catch (const Error& e) {
    throwTorchError(e.kind(), e.what());
  }
}

void MembershipLifecycle::announce(int rank, int size) const {
  if (!handle_.empty()) {
    XCCL_INFO("backend", "group '", options_->group_name,
              "' created for reconfigure: no members until torch.distributed._reconfigure");
    return;
  }
  XCCL_INFO("backend", "group '", options_->group_name, "' rank ", rank, " of ", size,
            " ready (collectives over ", core_.membership().transportName(),
            ", messages to peers over ", core_.membership().peerTransportName(), ")");
}

std::chrono::milliseconds MembershipLifecycle::setupTimeout() const {
  // Building a membership (settings agreement, TCP mesh) waits for every rank: bounded by
  // XCCL_CONNECT_TIMEOUT_MS when set, else by the group timeout.
  return env::getString("XCCL_CONNECT_TIMEOUT_MS").empty()
             ? core_.sequencer().timeout()
             : std::chrono::milliseconds(env::getInt("XCCL_CONNECT_TIMEOUT_MS"));
}

void MembershipLifecycle::connect(net::Store& store, std::chrono::milliseconds timeout) {
  GroupCore::ConnectOptions connect;
  connect.algorithm = options_->algorithm;
  connect.storeHost = options_->storeHost;
  // A membership that reconfigure() may replace lends no pool tensors: they would outlive it.
  connect.lendsPool = handle_.empty();
  core_.connect(store, timeout, connect);
  sides_.buildCpu();
}

bool MembershipLifecycle::startUnconnected(net::Store& store) {
#if XCCL_TORCH_HAS_RECONFIGURE
  if (!options_->enable_reconfigure) return false;
  // Every member on this store, a newcomer's included, reads the same job token.
  job_ = net::jobToken(store, "reconf/job", setupTimeout());
  handle_ = net::MemberHandle{job_, net::newMemberId(), topo::hostIdentity()}.format();
  // No transport yet: calls reach checkUsable(), which says to reconfigure first.
  core_.startWithoutMembers();
  sides_.buildCpu();
  return true;
#else
  (void)store;
  return false;
#endif
}

void MembershipLifecycle::abort() {
  core_.markBroken("abort() was called on rank " + std::to_string(core_.membership().rank()));
  sides_.abortGpu();
}

void MembershipLifecycle::shutdown() {
  if (core_.failure().markShutDown()) drop("");
}

void MembershipLifecycle::drop(const std::string& reason) {
  core_.stopMembership(reason);
  GilReleasedIfHeld noGil;  // as in stopMembership: the GPU side and the joins wait for threads
  sides_.shutdownGpu();
  core_.releaseMembership();
}

#if XCCL_TORCH_HAS_RECONFIGURE

c10d::ReconfigureHandle MembershipLifecycle::handle() const {
  TORCH_CHECK(!handle_.empty(), "xccl: this group has no reconfigure handle; create it with "
                                "init_process_group(..., enable_reconfigure=True)");
  return handle_;
}

c10::intrusive_ptr<c10d::Work> MembershipLifecycle::reconfigure(
    const c10d::ReconfigureOptions& opts, const std::function<void(int, int)>& adopt) {
  std::lock_guard<std::mutex> serial(reconfigureMutex_);
  GilReleasedIfHeld noGil;  // the rendezvous and the joins wait for other threads and processes
  const int64_t uuid = opts.uuid;
  const std::chrono::milliseconds timeout = opts.timeout.value_or(core_.sequencer().timeout());
  const std::string name = "reconf/" + std::to_string(uuid) + "/";
  StoreAdapter store(core_.membership().groupStore(), "xccl/" + name);
  std::vector<std::string> handles;
  int rank = -1;
  // Checks first: a refusal changes nothing and the current membership stays usable.
  try {
    XCCL_CHECK_ARG(!handle_.empty(), "reconfigure: this group was not created with "
                                     "init_process_group(..., enable_reconfigure=True)");
    XCCL_CHECK_ARG(!core_.failure().isShutDown(), "reconfigure: the process group was shut down");
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
  drop("xccl: the membership was superseded by reconfigure uuid " + std::to_string(uuid) +
       " (work issued before it cannot complete)");
  const int size = static_cast<int>(handles.size());
  adopt(rank, size);
  core_.renew(rank, size, name);
  membershipName_ = name;
  const auto began = std::chrono::steady_clock::now();
  try {
    net::awaitMembers(store, "", uuid, rank, handles, timeout);
    connect(store, timeout);
  } catch (const Error& e) {
    const std::string reason =
        "xccl: reconfigure uuid " + std::to_string(uuid) + " failed on rank " +
        std::to_string(rank) + " of " + std::to_string(handles.size()) + ": " + e.what() +
        " (the group stays unusable until a reconfigure with a fresh uuid succeeds)";
    drop(reason);
    throwTorchError(e.kind(), reason);
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - began);
  XCCL_INFO("backend", "reconfigure uuid ", uuid, ": rank ", rank, " of ", size, " in ",
            took.count(), " ms (collectives over ", core_.membership().transportName(), ")");
  // The membership is complete when reconfigure() returns: the Work has already succeeded.
  auto work = c10::make_intrusive<XcclWork>(rank, c10d::OpType::UNKNOWN, "xccl:reconfigure", 0,
                                            std::vector<at::Tensor>{}, timeout);
  work->succeed();
  return work;
}

#endif  // XCCL_TORCH_HAS_RECONFIGURE

}  // namespace xccl::backend
