#include "net/transport/hierarchy.h"

#include <algorithm>

#include "common/error.h"
#include "net/rendezvous/bootstrap.h"
#include "net/rendezvous/hosts.h"

namespace xccl::net {

std::unique_ptr<Hierarchy> Hierarchy::create(Store& store, Transport& tcp,
                                             const shm::Options& options, std::string* why) {
  const Bootstrap bootstrap(store, options.storePrefix, tcp.rank(), tcp.size(), options.timeout);
  // Where every rank is and whether it takes part; all decide from the same list.
  const Census census = takeCensus(bootstrap, "hosts", options.identity(), !options.disabled);
  return create(store, tcp, options, census, why);
}

std::unique_ptr<Hierarchy> Hierarchy::create(Store& store, Transport& tcp,
                                             const shm::Options& options, const Census& census,
                                             std::string* why) {
  const int rank = tcp.rank(), size = tcp.size();
  XCCL_CHECK_ARG(static_cast<int>(census.hosts.hostOf.size()) == size, "a census of ",
                 census.hosts.hostOf.size(), " ranks for a group of ", size);
  const Bootstrap bootstrap(store, options.storePrefix, rank, size, options.timeout);
  // 1. Whether the group qualifies, from the census (the same on every rank).
  if (census.firstAbsent >= 0) {
    *why = detail::concat("XCCL_SHM_DISABLE is set on rank ", census.firstAbsent);
    return nullptr;
  }
  const Hosts& hosts = census.hosts;
  if (hosts.count() == 1) {
    *why = "every rank is on one host";
    return nullptr;
  }
  if (hosts.count() == size) {
    *why = "every host has one rank of the group";
    return nullptr;
  }

  // 2. Each host with several ranks builds its segment, then every rank learns every outcome.
  std::unique_ptr<Hierarchy> h(new Hierarchy());
  h->hosts_ = hosts.count();
  const int host = hosts.hostOf[rank];
  h->local_ = hosts.ranksOn(host);
  h->placement_ = hosts;
  std::string failure;
  if (h->local_.size() > 1) {
    const std::string& identity = hosts.identities[host];
    shm::Options local = options;
    local.storePrefix = detail::concat(options.storePrefix, "/host", host);
    local.hostIdentity = identity;
    const int localSize = static_cast<int>(h->local_.size());
    const int localRank =
        static_cast<int>(std::find(h->local_.begin(), h->local_.end(), rank) - h->local_.begin());
    // The host's ranks, all on this host and all taking part: known, so not asked again.
    Census localCensus;
    localCensus.hosts = Hosts::of(std::vector<std::string>(localSize, identity));
    h->segment_ = shm::Segment::create(store, localRank, localSize, local, localCensus, &failure);
    if (!h->segment_) failure = "host '" + identity + "': " + failure;
  }
  const Agreement built = bootstrap.agree("built", failure);
  if (!built.ok()) {
    *why = built.first();
    return nullptr;
  }

  // 3. The leaders (each host's lowest rank, in host order) get their subset of the TCP mesh.
  if (h->local_.front() == rank) {
    h->leaders_ = std::make_unique<SubsetTransport>(tcp, hosts.leaders());
  }
  return h;
}

}  // namespace xccl::net
