// Groups that span hosts: one shared-memory segment per host that has several of the group's
// ranks, and the TCP transport seen as the subset of one leader per host (its lowest rank).
// all_reduce then runs in three phases (algo/runner.h): a shared-memory reduce to the leader
// inside each host, a TCP all_reduce among the H leaders, a shared-memory broadcast from the
// leader inside each host. Between hosts that moves the bytes of an H-rank all_reduce instead of
// an n-rank one, and nothing of it crosses loopback TCP.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "net/regions/shm/segment.h"
#include "net/rendezvous/hosts.h"
#include "net/rendezvous/store.h"
#include "net/transport/subset_transport.h"
#include "net/transport/transport.h"

namespace xccl::net {

class Hierarchy {
 public:
  // Collective over the store: every rank of `tcp`'s group calls it, after the group decided it
  // cannot share one segment. Returns nullptr with the reason, on every rank alike, when the
  // group does not qualify: all ranks on one host, one rank per host (nothing to share), shared
  // memory disabled on some rank, or some host could not build its segment. Hosts are told
  // apart by options.identity() (topo/host.h, or a stand-in); each host's segment is
  // created under options.storePrefix + "/host<h>". Throws (kTimeout) when a peer does not take
  // part in time.
  // This form takes its own census of hosts (net/rendezvous/hosts.h) first; a group's creation
  // passes the one it took already (net/rendezvous/group_layout.h) to the other.
  static std::unique_ptr<Hierarchy> create(Store& store, Transport& tcp,
                                           const shm::Options& options, std::string* why);
  static std::unique_ptr<Hierarchy> create(Store& store, Transport& tcp,
                                           const shm::Options& options, const Census& census,
                                           std::string* why);

  int hosts() const { return hosts_; }
  // This host's ranks of the group, ascending; the first is the host's leader.
  const std::vector<int>& local() const { return local_; }
  // Where every rank of the group is (the same on every rank): the hierarchical collectives
  // other than all_reduce (algo/hierarchical.h) address other hosts' ranks and leaders.
  const Hosts& placement() const { return placement_; }
  // This host's segment (local rank = index in local()); null when the host has one rank.
  shm::Segment* segment() const { return segment_.get(); }
  // The leaders as a transport of their own (host order); null on ranks that do not lead.
  Transport* leaders() const { return leaders_.get(); }

 private:
  Hierarchy() = default;

  int hosts_ = 0;
  std::vector<int> local_;
  Hosts placement_;
  std::unique_ptr<shm::Segment> segment_;
  std::unique_ptr<SubsetTransport> leaders_;
};

}  // namespace xccl::net
