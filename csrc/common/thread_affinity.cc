#include "common/thread_affinity.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <memory>

#include "common/env.h"
#include "common/error.h"
#include "common/logging.h"
#include "common/ranges.h"

namespace xccl::affinity {
namespace {

// Large enough for any machine Linux supports today; CPU_ALLOC sizes the mask dynamically so
// hosts with more than CPU_SETSIZE (1024) CPUs work too.
constexpr int kMaxCpus = 8192;

struct CpuSetDeleter {
  void operator()(cpu_set_t* set) const { CPU_FREE(set); }
};
using CpuSet = std::unique_ptr<cpu_set_t, CpuSetDeleter>;

CpuSet emptySet() {
  CpuSet set(CPU_ALLOC(kMaxCpus));
  CPU_ZERO_S(CPU_ALLOC_SIZE(kMaxCpus), set.get());
  return set;
}

}  // namespace

std::vector<int> allowedCpus() {
  CpuSet set = emptySet();
  const size_t size = CPU_ALLOC_SIZE(kMaxCpus);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, size, set.get()) != 0) return cpus;
  for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
    if (CPU_ISSET_S(cpu, size, set.get())) cpus.push_back(cpu);
  }
  return cpus;
}

bool pinCurrentThread(const std::vector<int>& cpus) {
  std::vector<int> allowed = allowedCpus();
  std::vector<int> wanted(cpus);
  std::sort(wanted.begin(), wanted.end());
  std::vector<int> target;
  std::set_intersection(wanted.begin(), wanted.end(), allowed.begin(), allowed.end(),
                        std::back_inserter(target));
  if (target.empty()) {
    XCCL_INFO("affinity", "not pinning: none of CPUs ", formatCpuList(cpus),
              " is in this thread's allowed set ", formatCpuList(allowed));
    return false;
  }
  CpuSet set = emptySet();
  const size_t size = CPU_ALLOC_SIZE(kMaxCpus);
  for (int cpu : target) {
    if (cpu >= 0 && cpu < kMaxCpus) CPU_SET_S(cpu, size, set.get());
  }
  // With pid 0, sched_setaffinity applies to the calling thread only, not the whole process.
  if (::sched_setaffinity(0, size, set.get()) != 0) {
    XCCL_WARN("affinity", "pinning to CPUs ", formatCpuList(target), " failed: ", errnoText(errno));
    return false;
  }
  return true;
}

bool pinProgressThread(const std::vector<int>& cpus, const char* subsystem) noexcept {
  // Everything below may allocate or read the environment; a progress thread must never die
  // of an optimisation, so any failure just leaves the thread where the scheduler put it.
  try {
    if (cpus.empty()) return false;
    bool enabled = true;
    try {
      enabled = env::getBool("XCCL_PIN_PROGRESS");
    } catch (const Error& e) {
      XCCL_WARN(subsystem, "progress thread not pinned: ", e.what());
      return false;
    }
    if (!enabled) {
      XCCL_DEBUG(subsystem, "progress thread not pinned (XCCL_PIN_PROGRESS=0)");
      return false;
    }
    const bool pinned = pinCurrentThread(cpus);
    if (pinned) {
      XCCL_INFO(subsystem, "progress thread pinned to CPUs ", formatCpuList(allowedCpus()));
    }
    return pinned;
  } catch (...) {
    return false;
  }
}

std::string formatCpuList(std::vector<int> cpus) { return formatRanges(std::move(cpus)); }

}  // namespace xccl::affinity
