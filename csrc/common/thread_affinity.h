// CPU affinity of the calling thread: the mechanism behind pinning progress threads.
//
// Which CPUs a progress thread should use is a topology question (topo::progressCpusFor); this
// file only applies an answer, so the transports (csrc/net) can pin their threads without
// depending on csrc/topo.
#pragma once

#include <string>
#include <vector>

namespace xccl::affinity {

// The CPUs the calling thread may run on (its affinity mask, shaped by cgroups and taskset),
// sorted; empty when the kernel does not say.
std::vector<int> allowedCpus();

// Restricts the calling thread to `cpus` intersected with allowedCpus(). Pinning is an
// optimisation: when the intersection is empty (a container limited to other cores) or the
// kernel refuses, the thread is left as it was and false is returned; it never throws.
bool pinCurrentThread(const std::vector<int>& cpus);

// Called first thing on a progress thread. Pins it to `cpus` unless the list is empty (nothing
// is known about placement) or XCCL_PIN_PROGRESS is off; logs the outcome once per call under
// `subsystem`. Returns whether the thread was pinned. Never throws: a bad XCCL_PIN_PROGRESS value
// is a warning and leaves the thread unpinned.
bool pinProgressThread(const std::vector<int>& cpus, const char* subsystem) noexcept;

// The kernel's cpulist syntax: sorted, de-duplicated ranges ("0-3,8,10-11"); "" for none.
std::string formatCpuList(std::vector<int> cpus);

}  // namespace xccl::affinity
