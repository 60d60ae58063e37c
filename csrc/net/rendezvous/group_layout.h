// Where a group's ranks are, worked out once per membership at its creation and read by
// everything that depends on it: the transport factory (factory.h), the collective segment
// (shm/segment.h), the hierarchy of hosts (hierarchy.h), and above the net level the tuning
// agreement, the plan's group shape (algo::shapeOf), windows and the GPU placement. Taking it is
// the group's one census of hosts; nothing else asks the store where ranks are.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/vocabulary.h"
#include "net/regions/shm/segment.h"
#include "net/rendezvous/hosts.h"
#include "net/rendezvous/store.h"

namespace xccl::net {

struct GroupLayout {
  int rank = 0;
  int size = 1;
  // XCCL_SHM_* as this rank read them, once (shm::Options::fromEnvironment()).
  shm::Options shm;
  // Every rank's host, and the first rank that disabled shared memory (the same on every rank).
  Census census;
  // How the group's collectives travel, once its segment or hierarchy is known (kNone until
  // then, and when neither could be built).
  vocab::Locality locality = vocab::Locality::kNone;

  // Collective over the store (every rank of the group calls it): reads the options and
  // gathers every rank's host and vote under `storePrefix` + "/hosts". A group of one asks
  // nobody. Throws (kTimeout) when a peer does not take part in time.
  static GroupLayout take(Store& store, int rank, int size, const std::string& storePrefix,
                          std::chrono::milliseconds timeout);
  // Pure: the layout of `census` as rank `rank` sees it, for `shm` (tests act out hosts).
  static GroupLayout of(int rank, const shm::Options& shm, Census census);

  int hosts() const { return census.hosts.count(); }
  // This rank's host identity as the group learnt it: shm.identity() (topo::hostIdentity(), or
  // XCCL_SHM_HOST_ID).
  const std::string& identity() const { return census.hosts.identities[host()]; }
  // This rank's host's index, and its ranks (ascending; the first leads it).
  int host() const { return census.hosts.hostOf[rank]; }
  std::vector<int> ranksOnThisHost() const { return census.hosts.ranksOn(host()); }
  // Some rank set XCCL_SHM_DISABLE: the group shares no memory anywhere.
  bool shmDisabled() const { return census.firstAbsent >= 0; }
};

}  // namespace xccl::net
