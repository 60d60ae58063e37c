#include "common/wait_slice.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "common/env.h"
#include "common/logging.h"

namespace xccl::wait_slice {
namespace {

// The kernel's struct sched_attr (include/uapi/linux/sched/types.h), first version: glibc has
// no wrapper for sched_setattr/sched_getattr before 2.41.
struct SchedAttr {
  uint32_t size;
  uint32_t policy;
  uint64_t flags;
  int32_t nice;
  uint32_t priority;
  uint64_t runtime;  // for SCHED_OTHER/BATCH since 6.12: the slice in ns (0: the default)
  uint64_t deadline;
  uint64_t period;
};
constexpr uint32_t kSchedOther = 0, kSchedBatch = 3;
constexpr uint64_t kKernelMinNs = 100'000;  // the kernel clamps requests to 0.1-100 ms

bool getAttr(SchedAttr* attr) {
  std::memset(attr, 0, sizeof(*attr));
  return ::syscall(SYS_sched_getattr, 0, attr, sizeof(*attr), 0) == 0;
}

bool setAttr(const SchedAttr& attr) {
  SchedAttr copy = attr;
  copy.size = sizeof(copy);
  copy.flags = 0;
  return ::syscall(SYS_sched_setattr, 0, &copy, 0) == 0;
}

// 0 off, else the slice in ns; read once. Unsupported kernels turn it off (see trySet).
std::atomic<uint64_t>& requested() {
  static std::atomic<uint64_t> value = [] {
    uint64_t us = 0;
    try {
      us = static_cast<uint64_t>(env::getInt("XCCL_WAIT_SLICE_US"));
    } catch (...) {
      return uint64_t{0};  // env::checkAll names the bad value at group creation
    }
    return us == 0 ? 0 : std::max<uint64_t>(us * 1000, kKernelMinNs);
  }();
  return value;
}

// Whether the kernel honoured a request: learned from the first one, once per process.
std::atomic<int> honoured{-1};  // -1 unknown, 0 no, 1 yes

// Sets the calling thread's slice to `ns`, keeping its policy and nice value. Returns what it
// had through *previous, and whether it changed anything.
bool trySet(uint64_t ns, SchedAttr* previous) {
  SchedAttr attr;
  if (!getAttr(&attr) || (attr.policy != kSchedOther && attr.policy != kSchedBatch)) {
    return false;  // real-time and idle threads have no slice to shorten
  }
  if (attr.runtime == ns) return false;
  *previous = attr;
  attr.runtime = ns;
  if (!setAttr(attr)) return false;
  if (honoured.load(std::memory_order_relaxed) < 0) {
    SchedAttr now;
    const bool ok = getAttr(&now) && now.runtime == ns;
    honoured.store(ok ? 1 : 0, std::memory_order_relaxed);
    if (!ok) {
      XCCL_INFO("wait", "this kernel keeps its own scheduler slices (custom slices need Linux "
                        "6.12 or later); XCCL_WAIT_SLICE_US has no effect here");
      requested().store(0, std::memory_order_relaxed);
      return false;
    }
  }
  return true;
}

thread_local bool keptShort = false;  // this thread has the short slice for life

}  // namespace

void keepShort() noexcept {
  const uint64_t ns = requested().load(std::memory_order_relaxed);
  SchedAttr previous;
  if (ns != 0 && !keptShort && (trySet(ns, &previous) || currentNs() == ns)) keptShort = true;
}

WhileWaiting::WhileWaiting() noexcept {
  if (keptShort) return;  // an xccl thread: short for life (a nested wait finds it set too)
  const uint64_t ns = requested().load(std::memory_order_relaxed);
  SchedAttr previous;
  if (ns == 0 || !trySet(ns, &previous)) return;
  changed_ = true;
  policy_ = previous.policy;
  nice_ = previous.nice;
  previous_ = previous.runtime;
}

WhileWaiting::~WhileWaiting() {
  if (!changed_) return;
  SchedAttr attr{};
  attr.policy = policy_;
  attr.nice = nice_;
  attr.runtime = previous_;
  setAttr(attr);  // best effort: a refusal leaves the short slice, which is harmless
}

uint64_t requestedNs() noexcept {
  return honoured.load(std::memory_order_relaxed) == 0
             ? 0
             : requested().load(std::memory_order_relaxed);
}

uint64_t currentNs() noexcept {
  SchedAttr attr;
  return getAttr(&attr) ? attr.runtime : 0;
}

}  // namespace xccl::wait_slice
