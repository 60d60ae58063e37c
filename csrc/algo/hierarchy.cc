#include "algo/hierarchy.h"

#include <algorithm>

#include "common/error.h"

namespace xccl::algo {

std::unique_ptr<Hierarchy> Hierarchy::create(net::Store& store, net::Transport& tcp,
                                             const net::shm::Options& options, std::string* why) {
  const int rank = tcp.rank(), size = tcp.size();
  const std::string& prefix = options.storePrefix;
  const std::string identity =
      options.hostIdentity.empty() ? net::shm::hostIdentity() : options.hostIdentity;
  // 1. Every rank publishes "<enabled><identity>"; all decide from the same list.
  std::vector<net::Bytes> votes = net::allGatherThroughStore(
      store, prefix + "/hosts", rank, size,
      net::toBytes((options.disabled ? "0" : "1") + identity), options.timeout);
  std::vector<std::string> hostOf(size);  // identity per rank
  std::vector<std::string> hosts;         // identities in order of their lowest rank
  for (int r = 0; r < size; ++r) {
    const std::string vote = net::toString(votes[r]);
    if (vote[0] == '0') {
      *why = detail::concat("XCCL_SHM_DISABLE is set on rank ", r);
      return nullptr;
    }
    hostOf[r] = vote.substr(1);
    if (std::find(hosts.begin(), hosts.end(), hostOf[r]) == hosts.end()) hosts.push_back(hostOf[r]);
  }
  if (hosts.size() == 1) {
    *why = "every rank is on one host";
    return nullptr;
  }
  if (hosts.size() == static_cast<size_t>(size)) {
    *why = "every host has one rank of the group";
    return nullptr;
  }

  // 2. Each host with several ranks builds its segment, then everyone votes on the outcome.
  std::unique_ptr<Hierarchy> h(new Hierarchy());
  h->hosts_ = static_cast<int>(hosts.size());
  const size_t host = std::find(hosts.begin(), hosts.end(), hostOf[rank]) - hosts.begin();
  for (int r = 0; r < size; ++r) {
    if (hostOf[r] == hostOf[rank]) h->local_.push_back(r);
  }
  std::string failure;
  if (h->local_.size() > 1) {
    net::shm::Options local = options;
    local.storePrefix = detail::concat(prefix, "/host", host);
    local.hostIdentity = identity;
    const int localRank =
        static_cast<int>(std::find(h->local_.begin(), h->local_.end(), rank) - h->local_.begin());
    h->segment_ = net::shm::Segment::create(store, localRank, static_cast<int>(h->local_.size()),
                                            local, &failure);
    if (!h->segment_) failure = "host '" + identity + "': " + failure;
  }
  std::vector<net::Bytes> built = net::allGatherThroughStore(
      store, prefix + "/built", rank, size, net::toBytes(failure.empty() ? "ok" : failure),
      options.timeout);
  for (int r = 0; r < size; ++r) {
    const std::string vote = net::toString(built[r]);
    if (vote != "ok") {
      *why = detail::concat("rank ", r, ": ", vote);
      return nullptr;
    }
  }

  // 3. The leaders (each host's lowest rank, in host order) get their subset of the TCP mesh.
  if (h->local_.front() == rank) {
    std::vector<int> leaders;
    for (const std::string& id : hosts) {
      leaders.push_back(static_cast<int>(std::find(hostOf.begin(), hostOf.end(), id) -
                                         hostOf.begin()));
    }
    h->leaders_ = std::make_unique<net::SubsetTransport>(tcp, std::move(leaders));
  }
  return h;
}

}  // namespace xccl::algo
