// One POSIX shared-memory segment per group of ranks on one host: the slots the shm collectives
// (algo/shm_collectives.h) move data through, and one sequence flag per rank that says how far
// that rank got. Layout, flag protocol and cleanup guarantees: docs/shm.md.
//
// Lifetime: rank 0 creates the segment under a random name, every rank maps it, and rank 0
// unlinks the name as soon as every rank confirmed its mapping (before create() returns there),
// so nothing is left in /dev/shm whatever happens to the processes later. The memory lives until
// the last rank unmaps it.
//
// Threads: one collective at a time per Segment (the backend's executor thread); the methods are
// not synchronised among themselves.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/regions/shm/cma.h"
#include "net/regions/shm/pool.h"
#include "net/regions/shm/spin_policy.h"
#include "net/rendezvous/hosts.h"
#include "net/rendezvous/store.h"
#include "net/transport/transport.h"
#include "topo/host.h"

namespace xccl::net::shm {

// Slot size when neither Options nor XCCL_SHM_SLOT_BYTES give one: two slots per rank (double
// buffering), so 4 ranks use 32 MiB. Halved (down to kMinAdaptiveSlotBytes) until the segment
// fits in half of /dev/shm's free space; containers default to a 64 MB /dev/shm.
constexpr size_t kDefaultSlotBytes = size_t{4} << 20;
constexpr size_t kMinAdaptiveSlotBytes = size_t{64} << 10;
constexpr size_t kMinSlotBytes = 4096;  // explicit sizes are rounded up to whole pages
// Every segment's name starts with this ("/dev/shm/xccl-..."), so leftovers are recognisable.
constexpr const char* kNamePrefix = "xccl-";
// Pool bytes per rank (pool.h) when XCCL_SHM_POOL_BYTES is unset. Pages are reserved only as
// tensors use them; the creating rank lowers every pool to a share of /dev/shm's free space.
constexpr size_t kDefaultPoolBytes = size_t{256} << 20;

struct Options {
  // Bytes of one slot. 0: kDefaultSlotBytes adapted to /dev/shm. Non-zero: used as given (rounded
  // up to a page) or the segment is unavailable if it does not fit.
  size_t slotBytes = 0;
  // Bytes of each rank's pool of tensor memory (pool.h); 0: no pools. The creating rank rounds it
  // to pages and caps it at half of /dev/shm's free space divided among the ranks.
  size_t poolBytes = 0;
  // This rank refuses shared memory; the whole group then agrees it is unavailable.
  bool disabled = false;
  // Bound for each store exchange during create().
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Store keys are written under this prefix: unique per group and per create() call.
  std::string storePrefix = "shm";
  // Which host this rank is on; empty: topo::hostIdentity(). Tests set it to simulate hosts.
  std::string hostIdentity;
  // This rank lets the group read each other's memory (cma.h) if all can. fromEnvironment():
  // XCCL_SHM_CMA is not 0 (the default).
  bool cma = true;
  // The pid this rank publishes for it; 0: getpid(). Tests give another to act out ranks in
  // different pid namespaces.
  pid_t cmaPid = 0;

  // slotBytes from XCCL_SHM_SLOT_BYTES (unset: 0), poolBytes from XCCL_SHM_POOL_BYTES (unset:
  // kDefaultPoolBytes), disabled from XCCL_SHM_DISABLE,
  // hostIdentity from XCCL_SHM_HOST_ID, cma from XCCL_SHM_CMA.
  static Options fromEnvironment();
  // hostIdentity, else topo::hostIdentity().
  std::string identity() const;
};

// Collective over the store: whether every rank of the group published the same identity.
bool allOnOneHost(Store& store, int rank, int size, std::chrono::milliseconds timeout,
                  const std::string& storePrefix,
                  const std::string& identity = topo::hostIdentity());

// Says whether `rank` is still alive: false when it is known dead (process exited, connection
// closed). It may also throw an xccl::Error itself (kAborted after abort()) to end a wait.
// Called from waits that already slept, at most every few milliseconds.
using PeerAlive = std::function<bool(int rank)>;

struct RankFlag;  // layout.h

// What bounds one wait: the collective's deadline, its name for messages ("allreduce #12"), and
// the liveness check (may be empty: then only the deadline ends a wait for a dead peer).
struct WaitBounds {
  Deadline deadline;
  const std::string& what;
  const PeerAlive& alive;
};

class Segment {
 public:
  // Collective over the store: every rank of the group calls it. Returns nullptr, with the reason
  // in *whyUnavailable, when shared memory cannot be used (ranks on different hosts, disabled,
  // /dev/shm too small or unusable); every rank then gets nullptr, so the group can fall back to
  // TCP as one. Throws (kTimeout) only when a peer does not take part in time.
  // This form takes its own census of hosts first (net/rendezvous/hosts.h: every rank's
  // options.identity() and options.disabled); a group's creation, which took one already
  // (net/rendezvous/group_layout.h), passes it to the other.
  static std::unique_ptr<Segment> create(Store& store, int rank, int size, const Options& options,
                                         std::string* whyUnavailable);
  static std::unique_ptr<Segment> create(Store& store, int rank, int size, const Options& options,
                                         const Census& census, std::string* whyUnavailable);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slotBytes() const { return slotBytes_; }
  // Bytes of the header, flags and slots (the pools are mapped apart: pool()).
  size_t totalBytes() const { return totalBytes_; }
  // The name it had in /dev/shm (without the leading '/'); already unlinked.
  const std::string& name() const { return name_; }
  // The ranks' tensor pools (null without); shared with the tensors allocated from it.
  const std::shared_ptr<Pool>& pool() const { return pool_; }
  // What all_gather and reduce_scatter moved through the slots and read from the pools.
  Traffic& traffic() { return traffic_; }

  // Steps. Every rank runs the same sequence of steps (each collective is a fixed number of
  // them, the same on every rank), numbered by a per-rank counter that persists across
  // collectives. At step s a rank may write its own slot of parity s & 1, then publishes s; its
  // flag reaching s means "my data for step s is in my slot, and I finished reading every slot
  // for the steps before s". Hence a rank may write its slot for step s once every rank's flag
  // has reached s - 1: whoever read that slot at step s - 2 is done with it (double buffering).
  uint32_t nextStep() { return ++step_; }
  uint8_t* slot(int rank, uint32_t step) const;
  // Release-stores `step` into this rank's flag and wakes sleepers.
  void publish(uint32_t step);
  // Acquire-loads `rank`'s flag: true once it published `step` or a later one.
  bool reached(int rank, uint32_t step) const;
  // Block until `rank` (or every rank) reached `step`: spin briefly, then futex-sleep in
  // short slices checking the deadline (kTimeout naming the missing ranks) and the liveness of
  // every peer (kPeerFailure naming the dead one).
  void waitFor(int rank, uint32_t step, const WaitBounds& bounds);
  void waitForAll(uint32_t step, const WaitBounds& bounds);
  // Stamps this rank's `runningAt` (steady clock, ns): it holds a core inside a collective. Done
  // by publish() and by waits while they spin; a waiter spins on for peers that stamp.
  void stampRunning(int64_t ns);

  // Which collective this rank runs (an opaque word from the shm collectives: a collective
  // counter, the kind, sizes). Stored before the collective's first publish, so a peer that saw
  // this rank reach one of that collective's steps reads it (or a later collective's word) and
  // can tell when the ranks called different collectives.
  void setSignature(uint64_t word);
  uint64_t signatureOf(int rank) const;
  // Where this rank's input of the current all_gather/reduce_scatter lies in its pool (offset + 1,
  // or 0: in its slots), stored with the slot of `step`'s parity: call it in a step that writes
  // that slot (after beginWriting's wait), before publishing; readers load it after waiting for
  // the step and before the writer can reach step + 2 (the slot-reuse invariant).
  void setDirect(uint32_t step, uint64_t word);
  uint64_t directOf(int rank, uint32_t step) const;
  // Where this rank's buffer of the current collective lies in its address space, for peers that
  // read it with process_vm_readv (cma()); 0: nowhere. Stored, loaded and protected exactly like
  // the direct word of the same step.
  void setAddress(uint32_t step, uint64_t address);
  uint64_t addressOf(int rank, uint32_t step) const;
  // The peers' pids when every pair of ranks can read each other's memory; null otherwise (the
  // reason: cmaUnavailable()).
  const CmaPeers* cma() const { return cma_.get(); }
  const std::string& cmaUnavailable() const { return cmaWhyNot_; }
  // Counts the collectives run on this segment (the same sequence on every rank).
  uint64_t nextCollective() { return ++collective_; }
  // The last step nextStep() handed out: a collective that begins now starts at step() + 1.
  uint32_t step() const { return step_; }

  // After a failed wait the ranks' step counters no longer agree: the segment refuses further
  // collectives (kAborted with this reason) instead of mixing up their data. The first call also
  // tells the peers (RankFlag::failed, and a wake-up for those asleep on this rank) which rank
  // this one found failed (blamePeer()), or itself, so that none waits for it in vain.
  void markBroken(const std::string& reason);
  // Remembers `rank` as the peer a failure here comes from (a wait found it dead, a read of its
  // memory failed), for markBroken to pass on.
  void blamePeer(int rank) const { blamed_ = rank; }
  void checkUsable(const std::string& what) const;

 private:
  Segment(int rank, int size, size_t slotBytes, size_t poolBytes, std::string name);
  // Maps `fd`, checks the header rank 0 wrote, and maps the pools.
  void map(int fd);
  void waitUntil(int onlyRank, uint32_t step, const WaitBounds& bounds);
  int spinOn(int onlyRank, int missing, uint32_t step);
  int yieldOn(int onlyRank, int missing, uint32_t step);
  int ranksAsleep() const;
  // Whether every rank a wait still needs stamped `runningAt` recently (spin_policy.h).
  bool waitedRanksRunning(int onlyRank, int missing, uint32_t step, int64_t ns) const;
  int firstMissing(int onlyRank, int from, uint32_t step) const;
  [[noreturn]] void throwTimeout(int onlyRank, uint32_t step, const WaitBounds& bounds) const;
  void checkPeers(int firstMissingRank, uint32_t step, const WaitBounds& bounds) const;

  const int rank_;
  const int size_;
  const size_t slotBytes_;
  const size_t poolBytes_;
  const std::string name_;
  size_t totalBytes_ = 0;
  uint8_t* base_ = nullptr;
  RankFlag* flags_ = nullptr;
  uint8_t* slots_ = nullptr;
  uint32_t step_ = 0;
  uint64_t collective_ = 0;
  std::string broken_;
  mutable int blamed_ = -1;  // blamePeer(): the peer the failure in progress comes from
  std::shared_ptr<Pool> pool_;
  Traffic traffic_;
  std::unique_ptr<CmaPeers> cma_;
  std::string cmaWhyNot_;
  SpinPolicy spin_;
};

}  // namespace xccl::net::shm
