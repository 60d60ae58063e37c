#include "backend/core/group_core_membership.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>

#include "algo/runner.h"
#include "backend/core/group_core_failure.h"
#include "backend/core/machine.h"
#include "common/env.h"
#include "common/logging.h"
#include "net/rendezvous/agree.h"
#include "net/transport/address.h"
#include "net/transport/factory.h"
#include "topo/affinity.h"

namespace xccl::backend {
namespace {

// The CPUs near the NIC that carries this rank's TCP traffic (`listen`, the address the transport
// listens on; topo/affinity.h); empty leaves the progress thread unpinned. The machine is
// discovered once per process. Pinning is an optimisation: a failure here (e.g. a malformed
// XCCL_TOPO_FILE) is logged, never fatal.
std::vector<int> progressCpus(const net::Address& listen) {
  try {
    // No discovery (NVML, sysfs walks) at group creation when its only use is switched off.
    if (!env::getBool("XCCL_PIN_PROGRESS")) return {};
    return topo::progressCpusFor(thisMachine(), /*gpu=*/-1, listen.toString());
  } catch (const std::exception& e) {
    XCCL_WARN("backend", "progress thread left unpinned: ", e.what());
    return {};
  }
}

// XCCL_NET_IFNAMES split at commas, once the NIC selection declares it; until then every
// usable interface (empty).
std::vector<std::string> netIfnames() {
  std::vector<std::string> names;
  const std::string text = env::getString("XCCL_NET_IFNAMES");
  for (size_t start = 0; start < text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) names.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return names;
}

}  // namespace

Membership::Membership(c10::intrusive_ptr<c10d::Backend::Options> options,
                       c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                       const FailureState& failure, const GroupPolicy& policy)
    : options_(std::move(options)),
      failure_(failure),
      policy_(policy),
      store_(std::move(store)),
      rank_(rank),
      size_(size) {}

void Membership::connect(net::Store& store, std::chrono::milliseconds timeout,
                         const ConnectOptions& opts) {
  if (size_ > 1) {
    // What decides routes and algorithms must be equal on every rank, or ranks would take
    // different paths through one collective and deadlock: every rank fails alike instead,
    // naming the setting and which ranks have which value.
    net::Settings settings = env::groupWideSettings();
    settings.emplace_back("ProcessGroupXccl.Options.algorithm", opts.algorithm);
    net::agreeOnSettings(store, "settings", rank_, size_, settings, timeout);
  }
  // The group's one census of hosts (net/rendezvous/group_layout.h): every step below reads it.
  layout_ = net::GroupLayout::take(store, rank_, size_, "layout", timeout);
  // Per peer: shared memory on this host, XCCL_NET's engine to other hosts
  // (net/transport/factory.h).
  net::NetOptions net;
  net.storeHost = opts.storeHost;
  net.timeout = timeout;
  // The interface TCP listens on (it makes the same choice from storeHost), to pin near its NIC.
  net.progressCpus = progressCpus(net::chooseListenAddress(opts.storeHost));
  net.ifnames = netIfnames();
  transport_ = net::createTransport(store, layout_, net);
  setUpSharedMemory(store, opts.lendsPool);
  shape_ = algo::shapeOf(layout_);  // the locality is known now
  setUpTuning(store, timeout);
}

void Membership::abortTransport(const std::string& reason) {
  if (transport_) transport_->abort(reason);
}

void Membership::release() {
  tuning_ = {};
  shape_ = {};
  segment_.reset();
  hierarchy_.reset();
  transport_.reset();
}

void Membership::renew(int rank, int size, const std::string& storePrefix) {
  rank_ = rank;
  size_ = size;
  // Windows are numbered per membership, under its store prefix: a newcomer's first window and
  // the old members' next one must get the same number and keys.
  windows_.store(0);
  // The GPU side's exchanges (store()) get keys of this membership's own.
  membershipStore_ = c10::make_intrusive<c10d::PrefixStore>(storePrefix, store_);
  membershipEpoch_.fetch_add(1);
}

void Membership::checkHasMembers(const char* opName) const {
  TORCH_CHECK(transport_, "xccl ", opName,
              ": this group was created with enable_reconfigure=True and has no members yet; "
              "call torch.distributed._reconfigure first");
}

}  // namespace xccl::backend
