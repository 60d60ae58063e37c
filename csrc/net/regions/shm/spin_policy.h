// How long a shared-memory waiter spins before it sleeps, decided per wait from what is measured
// while the job runs (docs/shm.md, "Waiting"), not from a fixed spin count.
//
// Sleeping is cheap for the CPU and dear for latency: a futex wake-up and the scheduler's
// switch back cost tens of microseconds (more in a VM), several times a small collective's whole
// time, and one sleep in ten calls is a p90 ten times the median. Spinning is free while the host
// has a core to spare and a theft when it does not (4 ranks on 2 cores, CPU-bound processes
// beside the job): the spinner takes the turn of the peer it waits for. So a waiter spins on
// past the short spin only while
//   - the host's usable CPUs can hold every rank of the segment at once (affinity mask and the
//     cgroup's CPU quota; fixed for the segment's life), and
//   - no task waits for a core right now: the kernel's count of runnable tasks (the fourth field
//     of /proc/loadavg, an instantaneous count) is at most the online CPUs, and this thread was
//     not preempted while it spun (its involuntary context switches, which also catch a busy
//     cpuset or quota that the host-wide count cannot see; after one, no long spin for
//     kCooldown); both re-read every kRecheck while spinning, and
//   - for at most a budget that follows the wake-up cost measured on this host: the time from a
//     peer's futex wake to this thread running again, averaged over the recent sleeps.
// A wait that outlasts the budget sleeps as before; a waiter that stops spinning because a task
// wants its core sleeps at once.
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
  // After this thread was preempted while spinning, how long waits sleep after the short spin.
  static constexpr std::chrono::nanoseconds kCooldown{std::chrono::milliseconds(100)};

  // What the policy reads about the host and the calling thread (the real readers below; tests
  // give their own).
  struct Host {
    int (*runnableTasks)();
    int (*onlineCpus)();
    long (*preemptions)();
  };
  static Host realHost() { return Host{&runnableTasks, &onlineCpus, &preemptions}; }

  // `localRanks`: the ranks that wait on each other's flags (all on this host).
  explicit SpinPolicy(int localRanks);
  SpinPolicy(int localRanks, int usableCpus, Host host);

  // Whether spinning past the short spin is ever allowed for this segment.
  bool eligible() const { return eligible_; }
  // How long a waiter may spin on after the short spin (zero: sleep now). Reads the host's
  // runnable count and this thread's preemption count once.
  std::chrono::nanoseconds budget(Clock::time_point now);
  // While spinning: false once a runnable task has no core or this thread was preempted
  // (re-read at most every kRecheck).
  bool mayGoOn(Clock::time_point now);
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
  bool coreIsFree(Clock::time_point now);

  const Host host_;
  const bool eligible_;
  std::atomic<int64_t> wakeNs_;
  // Per waiting thread state; one thread waits on a segment at a time (the group's executor).
  Clock::time_point checkedAt_{};
  Clock::time_point quietFrom_{};  // no long spin before this (a preemption was seen)
  long preemptionsAtStart_ = -1;
};

}  // namespace xccl::net::shm
