// How long a shared-memory waiter spins before it sleeps, decided per wait from what is measured
// while the job runs (docs/shm.md, "Waiting"), not from a fixed spin count.
//
// Sleeping is cheap for the CPU and dear for latency: a futex wake-up and the scheduler's
// switch back cost tens of microseconds (more in a VM), several times a small collective's whole
// time, and one sleep in ten calls is a p90 ten times the median. Spinning is free while the host
// has a core to spare, and a theft when it has none and the rank waited for is off its core (4
// ranks on 2 cores, CPU-bound processes beside the job): the spinner takes the turn of the peer
// it waits for. So a waiter spins on past the short spin, for at most a budget that follows the
// wake-up cost measured on this host (the time from a peer's futex wake to this thread running
// again, averaged over the recent sleeps), while either
//   - a core is free: the host's usable CPUs can hold every rank of the segment at once
//     (affinity mask and the cgroup's CPU quota; fixed for the segment's life), the kernel's
//     count of runnable tasks (the fourth field of /proc/loadavg, an instantaneous count) is at
//     most the online CPUs, and this thread was not preempted while it spun (its involuntary
//     context switches, which also catch a busy cpuset or quota that the host-wide count cannot
//     see; after one, no spin on a free core for kCooldown); re-read every kRecheck; or
//   - every rank waited for is running, and the ranks fit the usable CPUs: it stamped its flag
//     line (`runningAt`) within kRunningFresh. A rank stamps when it publishes a step and while
//     it spins, so a fresh stamp says it holds a core and is inside the collective: its signal
//     is microseconds away, and this spin takes a core from a process that is not the peer. A
//     peer that was preempted, or sleeps, or computes outside the collective stops stamping and
//     the spin ends within kRunningFresh. With more ranks than CPUs (4 ranks on 2 cores) a spin
//     for a running peer takes the core of a third rank that has work, the one the running peer
//     waits for next: measured 10% slower from 256 KiB (benchmarks/RESULTS.md).
// With more ranks than CPUs the waiter yields instead (beginYield): sched_yield() hands its core
// to a rank with work at once, where a sleep would wait for a wake-up, but only while no other
// process wants a core (it would get the core for a whole slice).
// A wait that outlasts the budget sleeps as before; a waiter whose reasons to spin or yield are
// gone sleeps at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace xccl::net::shm {

class SpinPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  // Spin budget bounds and how it follows the wake-up cost: spinning k times a sleep's cost
  // loses at most 1/k of a long wait's time when the wait outlasts it, and saves a whole
  // wake-up on every shorter one.
  static constexpr std::chrono::nanoseconds kMinBudget{std::chrono::microseconds(20)};
  static constexpr std::chrono::nanoseconds kMaxBudget{std::chrono::microseconds(500)};
  static constexpr int kBudgetPerWakeCost = 4;
  // The wake-up cost assumed before the first sleep measured one (a VM's typical cost).
  static constexpr std::chrono::nanoseconds kInitialWakeCost{std::chrono::microseconds(50)};
  // How often a long spin re-reads the host's runnable count (each read is a ~1-2 us pread).
  static constexpr std::chrono::nanoseconds kRecheck{std::chrono::microseconds(25)};
  // After this thread was preempted while spinning, how long no spin counts a core as free.
  static constexpr std::chrono::nanoseconds kCooldown{std::chrono::milliseconds(100)};
  // A rank whose `runningAt` stamp is at most this old holds a core inside the collective: longer
  // than what a rank does between stamps in a busy collective (a chunk's copy and reduction, a
  // return to Python and the next call), short enough that a spin on a preempted peer is cheap.
  static constexpr std::chrono::nanoseconds kRunningFresh{std::chrono::microseconds(50)};
  // A yield that kept this thread off its core longer than this handed the core to a process
  // beside the job (the segment's own ranks give it back within one of their steps).
  static constexpr std::chrono::nanoseconds kLongYield{std::chrono::microseconds(500)};

  // What the policy reads about the host and the calling thread (the real readers below; tests
  // give their own).
  struct Host {
    int (*runnableTasks)();
    int (*onlineCpus)();
    long (*preemptions)();
  };
  static Host realHost() { return Host{&runnableTasks, &onlineCpus, &preemptions}; }

  // `localRanks`: the ranks that wait on each other's flags (all on this host). `enabled`:
  // false for XCCL_SHM_SPIN=short (never past the short spin).
  explicit SpinPolicy(int localRanks);
  SpinPolicy(int localRanks, int usableCpus, Host host, bool enabled = true);

  // Whether this segment may ever spin past the short spin (its ranks fit the usable CPUs).
  bool eligible() const { return eligible_; }
  // Starts a spin past the short spin: how long it may last at most (zero: sleep now, which
  // XCCL_SHM_SPIN=short and a segment whose ranks outnumber the usable CPUs always say).
  std::chrono::nanoseconds begin(Clock::time_point now);
  // While spinning: whether a core is free (re-read at most every kRecheck); false for good in
  // this spin once a runnable task had no core or this thread was preempted.
  bool coreIsFree(Clock::time_point now);
  // With more ranks than usable CPUs: starts handing this core to the other ranks with
  // sched_yield() instead of sleeping; its budget (zero: sleep now). Only while no task but the
  // segment's awake ranks wants a core: the host's runnable tasks are at most the local ranks
  // less `ranksAsleep` (those in a futex sleep on the segment's flags), re-read every kRecheck;
  // and not for kCooldown after a yield that kept this thread off its core for longer than
  // kLongYield (the core went to a process beside the job, for its whole slice).
  std::chrono::nanoseconds beginYield(Clock::time_point now, int ranksAsleep);
  // After each yield (`yieldedAt`: the time before it): whether to yield again. `ranksAsleep` is
  // read only when the recheck is due.
  bool yieldRecheckDue(Clock::time_point now) const { return now - checkedAt_ >= kRecheck; }
  bool mayYieldOn(Clock::time_point yieldedAt, Clock::time_point now, int ranksAsleep);
  // Whether a rank whose last `runningAt` stamp is `stampNs` runs at `nowNs` (same clock).
  // The stamp is a peer's word: any value is safe (a stamp from the far past or future, or one
  // whose distance overflows, is no running peer).
  static bool running(int64_t stampNs, int64_t nowNs);
  // A sleep that a peer's wake ended: from its wake call to this thread running again.
  void recordWakeCost(std::chrono::nanoseconds cost);
  std::chrono::nanoseconds wakeCost() const {
    return std::chrono::nanoseconds(wakeNs_.load(std::memory_order_relaxed));
  }

  // The host's facts the policy reads, process-wide. runnableTasks() returns -1 when
  // /proc/loadavg cannot be read (then the policy never spins long).
  static int runnableTasks();
  // The runnable count in a /proc/loadavg line; -1 when the line is not one.
  static int runnableIn(const char* line);
  static int onlineCpus();
  // CPUs this process may use: its affinity mask, less when the cgroup's CPU quota is smaller.
  static int usableCpus();
  // The calling thread's involuntary context switches so far (-1: unknown).
  static long preemptions();

 private:
  // How long a spin or a run of yields may last: kBudgetPerWakeCost times the wake-up cost,
  // within [kMinBudget, kMaxBudget].
  std::chrono::nanoseconds spinBudget() const;
  bool readCoreIsFree(Clock::time_point now);

  bool onlyRanksRunnable(int ranksAsleep);

  const Host host_;
  const int localRanks_;
  const bool enabled_;
  const bool eligible_;
  std::atomic<int64_t> wakeNs_;
  // Per waiting thread state; one thread waits on a segment at a time (the group's executor).
  Clock::time_point checkedAt_{};
  Clock::time_point quietFrom_{};  // no core counts as free before this (a preemption was seen)
  Clock::time_point noYieldUntil_{};  // no yielding before this (a long yield was seen)
  long preemptionsAtStart_ = -1;
  bool coreFree_ = false;  // the last reading, within this spin
};

}  // namespace xccl::net::shm
