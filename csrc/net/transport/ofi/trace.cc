#include "net/transport/ofi/trace.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "common/error.h"

namespace xccl::net::ofi {
namespace {

const char* const kStatNames[] = {"post header (fi_tsend)",     "post payload (fi_tsend)",
                                  "post receive (fi_trecv)",    "inject (fi_tinject)",
                                  "eager send, post->cqe",      "rendezvous send, post->cqe",
                                  "rendezvous recv, post->cqe", "progress in fi_cq_sread",
                                  "progress handling a wake",   "caller asleep in wait",
                                  "notify->caller running"};
static_assert(sizeof(kStatNames) / sizeof(kStatNames[0]) == Trace::kStatCount);

pid_t currentTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

void rusageNow(long* voluntary, long* involuntary) {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  *voluntary = usage.ru_nvcsw;
  *involuntary = usage.ru_nivcsw;
}

void raiseTo(std::atomic<uint64_t>& max, uint64_t value) {
  uint64_t seen = max.load(std::memory_order_relaxed);
  while (value > seen && !max.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

uint64_t Trace::nowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

void Trace::add(Stat stat, uint64_t ns) {
  Stats& s = stats_[stat];
  s.count.fetch_add(1, std::memory_order_relaxed);
  s.sumNs.fetch_add(ns, std::memory_order_relaxed);
  raiseTo(s.maxNs, ns);
}

void Trace::wake(long completions) {
  wakes_.fetch_add(1, std::memory_order_relaxed);
  if (completions <= 0) {
    emptyWakes_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  completions_.fetch_add(static_cast<uint64_t>(completions), std::memory_order_relaxed);
  raiseTo(maxPerWake_, static_cast<uint64_t>(completions));
}

void Trace::waited(bool slept, long voluntary, long involuntary) {
  waits_.fetch_add(1, std::memory_order_relaxed);
  if (slept) sleepingWaits_.fetch_add(1, std::memory_order_relaxed);
  callerVoluntary_.fetch_add(static_cast<uint64_t>(voluntary), std::memory_order_relaxed);
  callerInvoluntary_.fetch_add(static_cast<uint64_t>(involuntary), std::memory_order_relaxed);
}

bool Trace::readSchedstat(pid_t tid, Sched* out) {
  // /proc/<pid>/task/<tid>/schedstat: ns on the CPU, ns runnable but waiting, timeslices run.
  std::ifstream file("/proc/self/task/" + std::to_string(tid) + "/schedstat");
  return static_cast<bool>(file >> out->runNs >> out->queuedNs >> out->slices);
}

void Trace::progressStarted() {
  progressTid_ = currentTid();
  rusageNow(&progressVoluntary_, &progressInvoluntary_);
  readSchedstat(progressTid_, &progressStart_);
}

void Trace::progressStopped() {
  long voluntary = 0, involuntary = 0;
  rusageNow(&voluntary, &involuntary);
  progressVoluntary_ = voluntary - progressVoluntary_;
  progressInvoluntary_ = involuntary - progressInvoluntary_;
  Sched now;
  if (readSchedstat(progressTid_, &now)) {
    progressDelta_ = {now.runNs - progressStart_.runNs, now.queuedNs - progressStart_.queuedNs,
                      now.slices - progressStart_.slices};
  }
}

void Trace::callerSeen() {
  pid_t expected = 0;
  const pid_t tid = currentTid();
  if (callerTid_.load(std::memory_order_relaxed) == 0 &&
      callerTid_.compare_exchange_strong(expected, tid)) {
    readSchedstat(tid, &callerStart_);
  }
}

std::string Trace::summary() const {
  std::string out = "trace (XCCL_OFI_TRACE=1), per quantity: count, mean us, max us\n";
  char line[256];
  for (int i = 0; i < kStatCount; ++i) {
    const uint64_t n = stats_[i].count.load(), sum = stats_[i].sumNs.load();
    std::snprintf(line, sizeof(line), "  %-28s %10llu %10.1f %10.1f\n", kStatNames[i],
                  static_cast<unsigned long long>(n), n ? sum / 1e3 / n : 0.0,
                  stats_[i].maxNs.load() / 1e3);
    out += line;
  }
  const uint64_t wakes = wakes_.load(), empty = emptyWakes_.load(), done = completions_.load();
  std::snprintf(line, sizeof(line),
                "  progress wakes %llu (%llu empty), completions %llu (%.2f per non-empty "
                "wake, max %llu), control messages %llu\n",
                static_cast<unsigned long long>(wakes), static_cast<unsigned long long>(empty),
                static_cast<unsigned long long>(done),
                wakes > empty ? static_cast<double>(done) / (wakes - empty) : 0.0,
                static_cast<unsigned long long>(maxPerWake_.load()),
                static_cast<unsigned long long>(controls_.load()));
  out += line;
  std::snprintf(line, sizeof(line),
                "  progress thread: %ld voluntary / %ld involuntary switches, %.1f ms on CPU, "
                "%.1f ms runnable but queued, %llu slices\n",
                progressVoluntary_, progressInvoluntary_, progressDelta_.runNs / 1e6,
                progressDelta_.queuedNs / 1e6,
                static_cast<unsigned long long>(progressDelta_.slices));
  out += line;
  Sched caller, delta;
  const pid_t tid = callerTid_.load();
  if (tid != 0 && readSchedstat(tid, &caller)) {
    delta = {caller.runNs - callerStart_.runNs, caller.queuedNs - callerStart_.queuedNs,
             caller.slices - callerStart_.slices};
  }
  std::snprintf(line, sizeof(line),
                "  caller: %llu waits (%llu slept), %llu voluntary / %llu involuntary switches "
                "in them; its thread since the first wait: %.1f ms on CPU, %.1f ms queued, %llu "
                "slices",
                static_cast<unsigned long long>(waits_.load()),
                static_cast<unsigned long long>(sleepingWaits_.load()),
                static_cast<unsigned long long>(callerVoluntary_.load()),
                static_cast<unsigned long long>(callerInvoluntary_.load()), delta.runNs / 1e6,
                delta.queuedNs / 1e6, static_cast<unsigned long long>(delta.slices));
  out += line;
  return out;
}

}  // namespace xccl::net::ofi
