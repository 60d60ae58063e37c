// The group's shared memory: one segment when every rank is on one host, or a segment per host
// plus the host leaders' TCP subset when the group spans hosts (net/transport/hierarchy.h), built
// at group creation; and the liveness check their waits call. Which collective runs where is
// algo::planCpu's choice (algo::Runner); layout, algorithms and cleanup guarantees: docs/shm.md.
#include "backend/core/group_core_failure.h"
#include "backend/core/group_core_membership.h"
#include "common/logging.h"
#include "common/vocabulary.h"

namespace xccl::backend {

// Collective over the store, right after the TCP mesh (so peerAlive works from the first
// collective on). Every rank reaches the same outcome, so the whole group agrees on the
// transport; group rank 0 says once why shared memory is not (fully) used.
void Membership::setUpSharedMemory(net::Store& store, bool lendsPool) {
  alive_ = [this](int peer) { return peerAlive(peer); };
  if (size_ == 1) return;  // nothing to share: every collective is a local copy
  // The options and the census of the group's layout (net/rendezvous/group_layout.h), taken in
  // connect().
  net::shm::Options options = layout_.shm;
  // `store` is this group's (torch prefixes it per group), so the keys are unique per group.
  options.storePrefix = "shm";
  options.timeout = options_->timeout;
  // A membership that reconfigure() may replace lends no pool tensors: they would outlive it.
  if (!lendsPool) options.poolBytes = 0;
  std::string why;
  segment_ = net::shm::Segment::create(store, rank_, size_, options, layout_.census, &why);
  if (segment_) {
    layout_.locality = algo::Locality::kOneHost;
    return;
  }
  std::string whyNot;
  options.storePrefix = "shm-hosts";
  options.poolBytes = 0;  // tensors are allocated only from a one-host group's segment
  hierarchy_ = net::Hierarchy::create(store, *transport_, options, layout_.census, &whyNot);
  if (hierarchy_) layout_.locality = algo::Locality::kPerHost;
  if (rank_ != 0) return;
  const std::string group = "group '" + options_->group_name + "': ";
  if (hierarchy_) {
    XCCL_INFO("backend", group, "ranks on ", hierarchy_->hosts(), " hosts (", why,
              "); collectives run over shared memory inside each host and TCP between them");
    return;
  }
  // Asked for (XCCL_SHM_DISABLE) or expected (one rank per host) is worth an info line; a host
  // whose /dev/shm cannot hold the segment deserves a warning: it silently costs speed.
  const std::string text = group + "shared memory unavailable (" + why +
                           "; across hosts: " + whyNot + "); its collectives use TCP";
  if (options.disabled || why.find("different hosts") != std::string::npos) {
    XCCL_INFO("backend", text);
  } else {
    XCCL_WARN("backend", text);
  }
}

// Called by shared-memory waits that already slept (every few milliseconds per peer): cheap.
bool Membership::peerAlive(int peer) {
  failure_.checkInWait();
  std::string why;
  // The transport's reason names the rank and how it failed (connection closed, or its
  // communicator aborted, with that rank's own error).
  if (transport_->peerFailed(peer, &why)) throw Error(ErrorKind::kPeerFailure, why);
  return true;
}

bool Membership::somePeerFailed() const {
  if (failure_.broken()) return true;
  if (!transport_) return false;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_ && transport_->peerFailed(peer, nullptr)) return true;
  }
  return false;
}

std::string Membership::shmSegmentName() const {
  if (segment_) return segment_->name();
  if (hierarchy_ && hierarchy_->segment()) return hierarchy_->segment()->name();
  return "";
}

const char* Membership::transportName() const {
  // The CPU plan's route names (common/vocabulary.h).
  return vocab::name(segment_     ? vocab::CpuRoute::kShm
                     : hierarchy_ ? vocab::CpuRoute::kHierarchical
                                  : vocab::CpuRoute::kNet);
}

}  // namespace xccl::backend
