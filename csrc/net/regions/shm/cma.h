// Cross-memory attach (process_vm_readv): a rank copies straight out of a peer's address space,
// one copy instead of the two a slot takes (into the writer's slot, out of it). Which group may
// use it, the permission it needs, and the collectives' protocol: docs/shm.md, "Single copy
// between processes".
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/rendezvous/bootstrap.h"

namespace xccl::net::shm {

// `length` bytes at `remote` in the peer's address space, copied to `local` (ours).
struct CmaPiece {
  uint64_t remote;
  void* local;
  size_t length;
};

// Copies every piece from process `pid` with process_vm_readv, in batches of at most IOV_MAX
// pieces, resuming after partial transfers and EINTR. Nothing is written outside the pieces'
// local ranges, whatever the remote addresses are. Returns 0, or the errno of the first failure
// with *failedPiece set to its index (EFAULT for a range that wraps or that made no progress).
int cmaTryRead(pid_t pid, const CmaPiece* pieces, size_t count, size_t* failedPiece);

// The same, throwing kPeerFailure with `what` (the collective), the peer's rank and pid, the
// address range and the errno ("rank r failed: its process ... is gone" for ESRCH).
void cmaRead(const std::string& what, pid_t pid, int rank, const CmaPiece* pieces, size_t count);

// The group's permission to read each other: every rank's pid, probed for every pair.
class CmaPeers {
 public:
  // Collective over the store (Segment::create, after the segment is mapped): every rank calls
  // it with the same bootstrap. Each rank publishes "pid ppid address cookie", lets its peers
  // read it (under Yama ptrace_scope 1: PR_SET_PTRACER naming the ranks' common parent, and
  // nothing when they have none), and reads every peer's cookie; the group
  // agrees. Returns null on every rank alike, with the reason in *whyNot, when some rank has
  // `enabled` false (Options::cma) or some pair cannot read. `pid` is what this rank
  // publishes (getpid() in use; tests give another to act out a pid namespace).
  static std::unique_ptr<CmaPeers> probe(const Bootstrap& bootstrap, bool enabled, pid_t pid,
                                         std::string* whyNot);

  // Reads `length` bytes at `remote` of rank `rank` into `local`; throws as cmaRead().
  void read(const std::string& what, int rank, uint64_t remote, void* local, size_t length) const;
  pid_t pidOf(int rank) const { return pids_[rank]; }

 private:
  CmaPeers() = default;

  std::vector<pid_t> pids_;
  // What peers read in the probe: random, so a wrong pid (another process) cannot match.
  uint64_t cookie_ = 0;
};

// How this rank lets its peers read it, given Yama's ptrace_scope (-1 without Yama) and every
// rank's parent pid. Scope 0 (or no Yama): nothing to do. Scope 1: only a declared ptracer and
// its descendants may read, so `tracer` is the ranks' common parent (torchrun's and mp.spawn's
// ranks are siblings): nothing outside the job's own process tree gains access. Ranks with
// different parents would need PR_SET_PTRACER_ANY (any process of the user could then read the
// rank), which xccl never sets: `whyNot` says so and the group uses the slots. Scopes 2 and 3:
// `whyNot`. Pure, so that this security decision is tested on its own.
struct PeerAccess {
  pid_t tracer = 0;    // PR_SET_PTRACER's argument; 0: none needed
  std::string whyNot;  // "" when the peers can be let in
};
PeerAccess peerAccess(int scope, const std::vector<pid_t>& parents);

// Parses a decimal pid as published in the store: digits only, 1 to 4194304 (PID_MAX_LIMIT);
// 0 for anything else.
pid_t parsePid(const std::string& text);

}  // namespace xccl::net::shm
