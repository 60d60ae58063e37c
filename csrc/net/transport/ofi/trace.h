// Where the ofi engine's time goes, per message, behind XCCL_OFI_TRACE=1 (docs/network.md,
// "libfabric (ofi)"): how long posts take, how long a message waits for its completion, how
// the progress thread wakes (and how many completions each wake brings), how long a caller
// takes to wake after its completion, and the threads' context switches and run-queue delays.
// The summary is written when the transport closes. Off (the default), every hook is one
// predictable branch on a constant member: no clock reads, no atomics, no system calls.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace xccl::net::ofi {

class Trace {
 public:
  enum Stat {
    kPostHeader,      // fi_tsend of a header (with its inline payload)
    kPostPayload,     // fi_tsend of a large payload
    kPostReceive,     // fi_trecv of a large payload or a header slot
    kInject,          // fi_tinject of a small header message (no completion follows)
    kEagerSend,       // a header send: post to its completion on the progress thread
    kRendezvousSend,  // a large payload send: post to completion
    kRendezvousRecv,  // a large payload receive: post (after its header matched) to completion
    kSread,           // the progress thread inside fi_cq_sread
    kHandle,          // the progress thread handling what one fi_cq_sread returned
    kWaitAsleep,      // a caller asleep in wait()
    kHandOff,         // last completion's notify to the sleeping caller running again
    kStatCount
  };

  explicit Trace(bool on) : on_(on) {}
  bool on() const { return on_; }
  static uint64_t nowNs();

  void add(Stat stat, uint64_t ns);
  // One fi_cq_sread return with `completions` entries (0: timeout, signal or error).
  void wake(long completions);
  void control() { controls_.fetch_add(1, std::memory_order_relaxed); }
  void notified() { lastNotifyNs_.store(nowNs(), std::memory_order_relaxed); }
  uint64_t lastNotifyNs() const { return lastNotifyNs_.load(std::memory_order_relaxed); }
  // A caller's wait: `slept` whether it had to sleep; context switches of its thread meanwhile.
  void waited(bool slept, long voluntary, long involuntary);

  // Thread accounting: the progress thread at its start and end, a caller at its first wait.
  void progressStarted();
  void progressStopped();
  void callerSeen();

  // The summary, one line per quantity (written at close).
  std::string summary() const;

 private:
  struct Stats {
    std::atomic<uint64_t> count{0}, sumNs{0}, maxNs{0};
  };
  struct Sched {
    uint64_t runNs = 0, queuedNs = 0, slices = 0;
  };
  static bool readSchedstat(pid_t tid, Sched* out);

  const bool on_;
  Stats stats_[kStatCount];
  std::atomic<uint64_t> wakes_{0}, emptyWakes_{0}, completions_{0}, maxPerWake_{0};
  std::atomic<uint64_t> controls_{0}, waits_{0}, sleepingWaits_{0};
  std::atomic<uint64_t> callerVoluntary_{0}, callerInvoluntary_{0};
  std::atomic<uint64_t> lastNotifyNs_{0};
  // Progress thread: context switches and schedstat deltas over its life.
  long progressVoluntary_ = 0, progressInvoluntary_ = 0;
  Sched progressStart_, progressDelta_;
  pid_t progressTid_ = 0;
  std::atomic<pid_t> callerTid_{0};
  Sched callerStart_;
};

}  // namespace xccl::net::ofi
