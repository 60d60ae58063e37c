// Short scheduler slices for threads that wait on peers, so that a woken waiter runs at once on
// a host whose cores are busy (data loaders, compiles, other ranks).
//
// Why: Linux's fair scheduler (EEVDF, 6.6+) lets the task on a core finish its slice (about
// 0.75 ms times 1 + log2(CPUs)) before a woken task may preempt it, and checks again only at
// the next timer tick (4 ms at HZ=250). A rank that slept in a collective and is woken by its
// peer then waits milliseconds behind a busy process, every step of every collective. Since
// 6.12 a SCHED_OTHER thread may ask for a shorter slice (sched_setattr's sched_runtime, 0.1 to
// 100 ms, no privilege needed); its deadline comes earlier, so when it wakes it preempts a task
// with the default slice. Its share of the CPU stays the same: EEVDF is fair over time whatever
// the slices (docs/shm.md, "Waiting on a busy host", measures the difference).
//
// xccl's own threads (transport progress, the executor's worker and completion threads, the
// window waiter) keep the short slice for life; a caller's thread has it only while it sleeps
// in an xccl wait (WhileWaiting), and gets its own back afterwards. XCCL_WAIT_SLICE_US sets the
// slice; 0 leaves the scheduler alone. Kernels before 6.12 ignore the request: it is tried once
// per process and never again.
#pragma once

#include <cstdint>

namespace xccl::wait_slice {

// Gives the calling thread the short slice for the rest of its life. Never throws (a bad
// XCCL_WAIT_SLICE_US is reported by env::checkAll at group creation; here it means "off").
void keepShort() noexcept;

// While it lives, the calling thread has the short slice (unless it already does); the
// destructor restores the thread's own. Cheap when nested or when the feature is off. Construct
// it right before a thread may sleep, not around spins: it costs three system calls.
class WhileWaiting {
 public:
  WhileWaiting() noexcept;
  ~WhileWaiting();
  WhileWaiting(const WhileWaiting&) = delete;
  WhileWaiting& operator=(const WhileWaiting&) = delete;

 private:
  // What the thread had before, restored by the destructor without asking the kernel again.
  bool changed_ = false;
  uint32_t policy_ = 0;
  int32_t nice_ = 0;
  uint64_t previous_ = 0;  // ns
};

// For tests and diagnostics: the slice xccl asks for in ns (0: off or unsupported here), and
// the calling thread's current slice as the kernel reports it (0 when it does not).
uint64_t requestedNs() noexcept;
uint64_t currentNs() noexcept;

}  // namespace xccl::wait_slice
