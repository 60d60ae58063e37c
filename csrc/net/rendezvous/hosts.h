// Which ranks of a group share a host, from every rank's host identity (topo::hostIdentity(), or
// XCCL_SHM_HOST_ID standing in for it): the one grouping behind shared-memory segments
// (shm/segment.h), the hierarchy of hosts (hierarchy.h) and the GPU placement.
#pragma once

#include <string>
#include <vector>

#include "net/rendezvous/bootstrap.h"

namespace xccl::net {

struct Hosts {
  std::vector<int> hostOf;              // by rank: the index of its host
  std::vector<std::string> identities;  // by host, hosts in order of their lowest rank

  // Pure: every rank computes the same grouping from the same gathered identities.
  static Hosts of(const std::vector<std::string>& identityByRank);
  int count() const { return static_cast<int>(identities.size()); }
  std::vector<int> ranksOn(int host) const;  // ascending
  std::vector<int> leaders() const;          // each host's lowest rank, in host order
};

// One exchange: where every rank is, and whether it takes part (shared memory not disabled).
struct Census {
  Hosts hosts;
  int firstAbsent = -1;  // the lowest rank that does not take part; -1 when all do
};
Census takeCensus(const Bootstrap& bootstrap, const std::string& key, const std::string& identity,
                  bool takesPart);

}  // namespace xccl::net
