#include "net/regions/shm/spin_policy.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "common/env.h"
#include "common/files.h"
#include "common/thread_affinity.h"

namespace xccl::net::shm {
namespace {

// The cgroup v2 CPU quota of this process's cgroup as a CPU count rounded up ("200000 100000" is
// 2 CPUs), or 0 when there is none or it cannot be read.
int cgroupCpuQuota() {
  try {
    // "0::/path" is the cgroup v2 line; v1 hierarchies ("N:cpu,cpuacct:/path") have no cpu.max.
    const std::string cgroups = files::readRegularFile("/proc/self/cgroup", 64 << 10, "cgroup");
    const size_t at = cgroups.find("0::");
    if (at == std::string::npos || (at != 0 && cgroups[at - 1] != '\n')) return 0;
    const size_t end = cgroups.find('\n', at);
    std::string path = cgroups.substr(at + 3, end == std::string::npos ? end : end - at - 3);
    if (path.empty() || path[0] != '/' || path.find("..") != std::string::npos) return 0;
    if (path == "/") path.clear();
    const std::string text =
        files::readRegularFile("/sys/fs/cgroup" + path + "/cpu.max", 256, "cpu.max");
    long long quota = 0, period = 0;
    if (std::sscanf(text.c_str(), "%lld %lld", &quota, &period) != 2) return 0;  // "max ..."
    if (quota <= 0 || period <= 0 || quota > (1ll << 40)) return 0;
    return static_cast<int>(std::min<long long>((quota + period - 1) / period, 1 << 20));
  } catch (...) {
    return 0;  // no cgroup v2, or not readable: the affinity mask alone
  }
}

}  // namespace

// XCCL_SHM_SPIN=short: never past the short spin.
SpinPolicy::SpinPolicy(int localRanks)
    : SpinPolicy(localRanks, usableCpus(), realHost(), env::getString("XCCL_SHM_SPIN") != "short") {
}

SpinPolicy::SpinPolicy(int localRanks, int usableCpus, Host host, bool enabled)
    : host_(host),
      localRanks_(localRanks),
      enabled_(enabled),
      eligible_(localRanks >= 1 && usableCpus >= localRanks && host.runnableTasks() >= 0),
      wakeNs_(kInitialWakeCost.count()) {}

bool SpinPolicy::running(int64_t stampNs, int64_t nowNs) {
  if (stampNs == 0) return false;  // never stamped
  int64_t age = 0;
  if (__builtin_sub_overflow(nowNs, stampNs, &age)) return false;
  // A stamp a little after our clock reading is a peer that stamped since: running.
  return age >= -kRunningFresh.count() && age <= kRunningFresh.count();
}

int SpinPolicy::runnableTasks() {
  // Opened once for the process; pread at offset 0 makes procfs format the line afresh.
  static const int fd = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[128];
  const ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
  if (n <= 0) return -1;
  text[n] = '\0';
  return runnableIn(text);
}

int SpinPolicy::runnableIn(const char* line) {
  // "0.52 0.58 0.59 3/512 12345": the fourth field's first number. Parsed by hand: this runs in
  // waits, and sscanf's float parsing costs more than the read.
  const char* p = line;
  for (int field = 0; field < 3; ++field) {
    while (*p != '\0' && *p != ' ') ++p;
    while (*p == ' ') ++p;
  }
  int running = 0, digits = 0;
  for (; *p >= '0' && *p <= '9' && digits < 9; ++p, ++digits) running = running * 10 + (*p - '0');
  return digits > 0 && *p == '/' ? running : -1;
}

int SpinPolicy::onlineCpus() {
  static const int cpus = [] {
    const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<int>(std::min<long>(n, 1 << 20)) : 1;
  }();
  return cpus;
}

int SpinPolicy::usableCpus() {
  int cpus = static_cast<int>(affinity::allowedCpus().size());
  if (cpus <= 0) cpus = onlineCpus();
  const int quota = cgroupCpuQuota();
  return quota > 0 ? std::min(cpus, quota) : cpus;
}

long SpinPolicy::preemptions() {
  struct rusage usage{};
  if (::getrusage(RUSAGE_THREAD, &usage) != 0) return -1;
  return usage.ru_nivcsw;
}

bool SpinPolicy::readCoreIsFree(Clock::time_point now) {
  checkedAt_ = now;
  if (!eligible_ || now < quietFrom_) return false;
  const long preempted = host_.preemptions();
  if (preempted < 0) return false;
  if (preemptionsAtStart_ < 0) {
    preemptionsAtStart_ = preempted;
  } else if (preempted != preemptionsAtStart_) {
    quietFrom_ = now + kCooldown;  // something else wanted this core: leave it alone a while
    return false;
  }
  const int runnable = host_.runnableTasks();
  return runnable >= 0 && runnable <= host_.onlineCpus();
}

std::chrono::nanoseconds SpinPolicy::spinBudget() const {
  return std::clamp(wakeCost() * kBudgetPerWakeCost, kMinBudget, kMaxBudget);
}

std::chrono::nanoseconds SpinPolicy::begin(Clock::time_point now) {
  if (!enabled_ || !eligible_) return std::chrono::nanoseconds(0);
  preemptionsAtStart_ = -1;  // counted afresh from this spin's first look
  coreFree_ = readCoreIsFree(now);
  return spinBudget();
}

bool SpinPolicy::coreIsFree(Clock::time_point now) {
  // Once not free, not free for the rest of this spin: a preemption or a queued task is a reason
  // to leave this core alone, and the spin goes on only for a running peer.
  if (coreFree_ && now - checkedAt_ >= kRecheck) coreFree_ = readCoreIsFree(now);
  return coreFree_;
}

bool SpinPolicy::onlyRanksRunnable(int ranksAsleep) {
  const int runnable = host_.runnableTasks();
  return runnable >= 0 && runnable <= localRanks_ - std::clamp(ranksAsleep, 0, localRanks_);
}

std::chrono::nanoseconds SpinPolicy::beginYield(Clock::time_point now, int ranksAsleep) {
  if (!enabled_ || eligible_ || localRanks_ < 2 || now < noYieldUntil_) {
    return std::chrono::nanoseconds(0);
  }
  checkedAt_ = now;
  if (!onlyRanksRunnable(ranksAsleep)) return std::chrono::nanoseconds(0);
  return spinBudget();
}

bool SpinPolicy::mayYieldOn(Clock::time_point yieldedAt, Clock::time_point now, int ranksAsleep) {
  if (now - yieldedAt > kLongYield) {
    noYieldUntil_ = now + kCooldown;  // a process beside the job took the core
    return false;
  }
  checkedAt_ = now;
  return onlyRanksRunnable(ranksAsleep);
}

void SpinPolicy::recordWakeCost(std::chrono::nanoseconds cost) {
  // A sample over a second is no wake-up cost (a peer stopped in a debugger, a clock jump): the
  // budget is capped anyway, and such a sample would hold the average at the cap for long.
  if (cost.count() < 0 || cost > std::chrono::seconds(1)) return;
  const int64_t old = wakeNs_.load(std::memory_order_relaxed);
  // Exponential average over about the last eight sleeps.
  wakeNs_.store(old + (cost.count() - old) / 8, std::memory_order_relaxed);
}

}  // namespace xccl::net::shm
