// The step flags: publishing, and the bounded wait (spin, then futex sleep in slices).
//
// Memory ordering. A rank writes its slot with plain stores, then publishes its flag; a reader
// acquire-loads the flag and then reads the slot with plain loads. The publish is a seq_cst
// store (a release at least), so the slot contents happen-before the reader's loads.
// Lost wake-ups: the writer stores the flag and then loads `sleepers`; a sleeper increments
// `sleepers` and then loads the flag before futex_wait. Both sides are seq_cst, so at least one
// sees the other's write (Dekker): either the writer wakes, or the sleeper sees the new flag and
// does not sleep (futex_wait itself also refuses to sleep when the word changed). A missed wake
// would only cost one slice anyway.
#include <sched.h>

#include <optional>

#include "common/error.h"
#include "common/wait_slice.h"
#include "net/regions/shm/futex.h"
#include "net/regions/shm/layout.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define XCCL_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define XCCL_CPU_RELAX() asm volatile("yield" ::: "memory")
#else
#define XCCL_CPU_RELAX() asm volatile("" ::: "memory")
#endif

namespace xccl::net::shm {
namespace {

// A flag set within a few microseconds (the peer is running on another core) is caught by the
// short spin (a pause is ~10-140 cycles depending on the CPU). Past it, the waiter spins on only
// while spin_policy.h finds a core to spare, for a budget that follows the measured cost of a
// sleep; anything slower sleeps on the futex, with the short scheduler slice of
// common/wait_slice.h so that the peer's wake-up runs this rank at once even when busy processes
// share the cores. No sched_yield() in between: a yield hands the core to whatever else is
// runnable, and with a busy process there this rank gets it back only when that process's slice
// ends at a timer tick (milliseconds; measured in docs/shm.md, "Waiting on a busy host"). Pure
// spinning is the pathology on oversubscribed cores: 1000-2000 spins cost 1.3-4 ms per 4-rank
// all_reduce on 2 cores, which is why the policy never spins long there.
constexpr int kSpins = 256;
// Past those, a spin the policy allows looks at the clock every this many pauses.
constexpr int kSpinsPerLook = 64;
// How long one futex sleep lasts at most: bounds how late a dead peer or the deadline is noticed.
constexpr auto kSlice = std::chrono::milliseconds(5);

// Signed distance: correct across the 2^32 wrap as long as ranks are within 2^31 steps (they
// are within two).
bool atOrPast(uint32_t value, uint32_t step) { return static_cast<int32_t>(value - step) >= 0; }

// A steady-clock time in ns, as the flag words hold it (the same clock in every process).
int64_t nsOf(std::chrono::steady_clock::time_point at) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
}

int64_t nowNs() { return nsOf(std::chrono::steady_clock::now()); }

std::string rankList(const std::vector<int>& ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "]";
}

}  // namespace

void Segment::publish(uint32_t step) {
  RankFlag& flag = flags_[rank_];
  stampRunning(nowNs());
  flag.arrived.store(step, std::memory_order_seq_cst);
  if (flag.sleepers.load(std::memory_order_seq_cst) != 0) {
    flag.wokeAt.store(nowNs(), std::memory_order_release);
    futexWakeAll(&flag.arrived);
  }
}

// Release, and before the collective's first publish (seq_cst, program order): a peer that
// acquire-loaded that step from `arrived` then reads this word or a later one.
void Segment::setSignature(uint64_t word) {
  flags_[rank_].signature.store(word, std::memory_order_release);
}

uint64_t Segment::signatureOf(int rank) const {
  return flags_[rank].signature.load(std::memory_order_acquire);
}

// Relaxed is enough: the publish that follows is a release, and readers load it only after
// acquiring that publish.
void Segment::setDirect(uint32_t step, uint64_t word) {
  flags_[rank_].direct[step & 1].store(word, std::memory_order_relaxed);
}

uint64_t Segment::directOf(int rank, uint32_t step) const {
  return flags_[rank].direct[step & 1].load(std::memory_order_relaxed);
}

bool Segment::reached(int rank, uint32_t step) const {
  return atOrPast(flags_[rank].arrived.load(std::memory_order_acquire), step);
}

void Segment::waitFor(int rank, uint32_t step, const WaitBounds& bounds) {
  waitUntil(rank, step, bounds);
}

void Segment::waitForAll(uint32_t step, const WaitBounds& bounds) { waitUntil(-1, step, bounds); }

// The first rank at or after `from` (among `onlyRank`, or all when -1) that has not reached
// `step`; size_ when none. Flags only grow, so ranks before `from` need no second look.
int Segment::firstMissing(int onlyRank, int from, uint32_t step) const {
  if (onlyRank >= 0) return reached(onlyRank, step) ? size_ : onlyRank;
  for (int r = from; r < size_; ++r) {
    if (!reached(r, step)) return r;
  }
  return size_;
}

// Relaxed: the stamp orders nothing; a waiter only needs to see it within microseconds.
void Segment::stampRunning(int64_t ns) {
  flags_[rank_].runningAt.store(ns, std::memory_order_relaxed);
}

bool Segment::waitedRanksRunning(int onlyRank, int missing, uint32_t step, int64_t ns) const {
  auto runs = [&](int r) {
    return SpinPolicy::running(flags_[r].runningAt.load(std::memory_order_relaxed), ns);
  };
  if (onlyRank >= 0) return runs(onlyRank);
  for (int r = missing; r < size_; ++r) {
    if (r != rank_ && !reached(r, step) && !runs(r)) return false;
  }
  return true;
}

void Segment::waitUntil(int onlyRank, uint32_t step, const WaitBounds& bounds) {
  int missing = firstMissing(onlyRank, 0, step);
  for (int i = 0; i < kSpins && missing < size_; ++i) {
    XCCL_CPU_RELAX();
    missing = firstMissing(onlyRank, missing, step);
  }
  if (missing < size_) missing = spinOn(onlyRank, missing, step);
  if (missing < size_) missing = yieldOn(onlyRank, missing, step);
  std::optional<wait_slice::WhileWaiting> slice;  // a sleeping waiter wakes at once (wait_slice.h)
  if (missing < size_) slice.emplace();
  while (missing < size_) {
    const auto now = Clock::now();
    if (now >= bounds.deadline) throwTimeout(onlyRank, step, bounds);
    checkPeers(missing, step, bounds);
    RankFlag& flag = flags_[missing];
    flag.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = flag.arrived.load(std::memory_order_seq_cst);
    bool slept = false;
    if (!atOrPast(seen, step)) {
      futexWait(&flag.arrived, seen, std::min<Clock::duration>(kSlice, bounds.deadline - now));
      slept = true;
    }
    flag.sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (slept && atOrPast(flag.arrived.load(std::memory_order_acquire), step)) {
      // Woken by the publish we waited for (or it came as the slice ended): its wake call's
      // time, if it is this sleep's, gives the cost of sleeping on this host.
      const int64_t wokeAt = flag.wokeAt.load(std::memory_order_acquire);
      const int64_t sleptAt = nsOf(now);
      if (wokeAt >= sleptAt) spin_.recordWakeCost(std::chrono::nanoseconds(nowNs() - wokeAt));
    }
    missing = firstMissing(onlyRank, missing, step);
  }
}

// Past the short spin: spins on while a core is free or every rank waited for runs, for at most
// the policy's budget (spin_policy.h). Returns the first rank still missing (size_ when none).
int Segment::spinOn(int onlyRank, int missing, uint32_t step) {
  const auto start = Clock::now();
  const auto budget = spin_.begin(start);
  if (budget.count() <= 0) return missing;
  const auto until = start + budget;
  for (;;) {
    for (int i = 0; i < kSpinsPerLook && missing < size_; ++i) {
      XCCL_CPU_RELAX();
      missing = firstMissing(onlyRank, missing, step);
    }
    if (missing >= size_) return missing;
    const auto now = Clock::now();
    const int64_t ns = nsOf(now);
    stampRunning(ns);  // this rank runs too: a peer that waits on it may spin as well
    if (now >= until) return missing;
    if (!spin_.coreIsFree(now) && !waitedRanksRunning(onlyRank, missing, step, ns)) return missing;
  }
}

// With more ranks than CPUs, past the short spin: hands this core to another rank with
// sched_yield() while only the segment's ranks want the cores, for at most the policy's budget
// (spin_policy.h). Returns the first rank still missing (size_ when none).
int Segment::yieldOn(int onlyRank, int missing, uint32_t step) {
  auto before = Clock::now();
  const auto budget = spin_.beginYield(before, ranksAsleep());
  if (budget.count() <= 0) return missing;
  const auto until = before + budget;
  for (;;) {
    ::sched_yield();
    missing = firstMissing(onlyRank, missing, step);
    if (missing >= size_) return missing;
    const auto now = Clock::now();
    stampRunning(nsOf(now));
    if (now >= until) return missing;
    const bool recheck = spin_.yieldRecheckDue(now) || now - before > SpinPolicy::kLongYield;
    if (recheck && !spin_.mayYieldOn(before, now, ranksAsleep())) return missing;
    before = now;
  }
}

// Every sleeper counts itself on the flag it sleeps on (one at a time), so the counters' sum is
// the segment's ranks in a futex sleep (a woken one until it runs again). Peers' words: clamped
// by the policy.
int Segment::ranksAsleep() const {
  uint64_t asleep = 0;
  for (int r = 0; r < size_; ++r) asleep += flags_[r].sleepers.load(std::memory_order_relaxed);
  return static_cast<int>(std::min<uint64_t>(asleep, static_cast<uint64_t>(size_)));
}

void Segment::throwTimeout(int onlyRank, uint32_t step, const WaitBounds& bounds) const {
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if ((onlyRank < 0 || r == onlyRank) && !reached(r, step)) missing.push_back(r);
  }
  XCCL_THROW(ErrorKind::kTimeout, bounds.what,
             " timed out in shared memory; no signal from rank(s) ", rankList(missing),
             " (waiting for step ", step, ")");
}

// Every rank publishes every step of a collective, so a dead peer that has not reached `step`
// never will and the collective cannot finish; the one we wait for is checked first, and the
// others too: a rank stuck behind a live peer that itself waits for the dead one learns it
// directly. A dead peer that already reached `step` is no failure: it finished its part and
// exited (the last collective before a clean shutdown ends that way), and a later wait that
// still needs it fails then.
void Segment::checkPeers(int firstMissingRank, uint32_t step, const WaitBounds& bounds) const {
  for (int i = 0; i < size_; ++i) {
    const int r = (firstMissingRank + i) % size_;
    if (r == rank_ || reached(r, step)) continue;
    const uint32_t failed = flags_[r].failed.load(std::memory_order_seq_cst);
    if (failed != 0) {
      // Its word, not ours: a rank out of range is r itself.
      const int blamed = failed <= static_cast<uint32_t>(size_) ? static_cast<int>(failed) - 1 : r;
      blamePeer(blamed);
      if (blamed == r) {
        XCCL_THROW(ErrorKind::kPeerFailure, bounds.what, ": rank ", r,
                   " failed (its collective failed there) while rank ", rank_,
                   " waited for it in shared memory");
      }
      XCCL_THROW(ErrorKind::kPeerFailure, bounds.what, ": rank ", blamed, " failed (rank ", r,
                 " found it so and left the collective) while rank ", rank_, " waited for rank ", r,
                 " in shared memory");
    }
    if (bounds.alive && !bounds.alive(r)) {
      blamePeer(r);
      XCCL_THROW(ErrorKind::kPeerFailure, bounds.what, ": rank ", r,
                 " failed (its process exited or its connection closed) while rank ", rank_,
                 " waited for it in shared memory");
    }
  }
}

}  // namespace xccl::net::shm
