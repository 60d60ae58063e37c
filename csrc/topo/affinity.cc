#include "topo/affinity.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "common/error.h"
#include "common/logging.h"
#include "topo/sysfs.h"

namespace xccl::topo {
namespace {

// Large enough for any machine Linux supports today; CPU_ALLOC sizes the mask dynamically so
// hosts with more than CPU_SETSIZE (1024) CPUs work too.
constexpr int kMaxCpus = 8192;

struct CpuSetDeleter {
  void operator()(cpu_set_t* set) const { CPU_FREE(set); }
};

std::vector<int> nearCpus(const Topology& topology, const std::vector<int>& localCpus,
                          int numaNode) {
  if (!localCpus.empty()) return localCpus;
  std::vector<int> node = cpusOfNumaNode(topology, numaNode);
  return node.empty() ? topology.cpus : node;
}

}  // namespace

int numaNodeOfGpu(const Topology& topology, int gpu) {
  XCCL_CHECK_ARG(gpu >= 0 && gpu < static_cast<int>(topology.gpus.size()), "no GPU ", gpu,
                 " (the topology has ", topology.gpus.size(), ")");
  return topology.gpus[static_cast<size_t>(gpu)].numaNode;
}

int numaNodeOfNic(const Topology& topology, int nic) {
  XCCL_CHECK_ARG(nic >= 0 && nic < static_cast<int>(topology.nics.size()), "no NIC ", nic,
                 " (the topology has ", topology.nics.size(), ")");
  return topology.nics[static_cast<size_t>(nic)].numaNode;
}

std::vector<int> cpusOfNumaNode(const Topology& topology, int numaNode) {
  for (const NumaNode& node : topology.numaNodes) {
    if (node.id == numaNode) return node.cpus;
  }
  return {};
}

std::vector<int> cpusNearGpu(const Topology& topology, int gpu) {
  int numa = numaNodeOfGpu(topology, gpu);
  return nearCpus(topology, topology.gpus[static_cast<size_t>(gpu)].cpus, numa);
}

std::vector<int> cpusNearNic(const Topology& topology, int nic) {
  int numa = numaNodeOfNic(topology, nic);
  return nearCpus(topology, topology.nics[static_cast<size_t>(nic)].cpus, numa);
}

int gpuIndexByPciBusId(const Topology& topology, const std::string& busId) {
  std::string wanted = normalizePciBusId(busId);
  for (const Gpu& gpu : topology.gpus) {
    if (gpu.pciBusId == wanted) return gpu.index;
  }
  return -1;
}

int nicIndexByName(const Topology& topology, const std::string& name) {
  for (size_t i = 0; i < topology.nics.size(); ++i) {
    if (topology.nics[i].name == name || topology.nics[i].netdev == name) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

std::vector<int> allowedCpus() {
  std::unique_ptr<cpu_set_t, CpuSetDeleter> set(CPU_ALLOC(kMaxCpus));
  size_t size = CPU_ALLOC_SIZE(kMaxCpus);
  CPU_ZERO_S(size, set.get());
  std::vector<int> cpus;
  if (::sched_getaffinity(0, size, set.get()) != 0) return cpus;
  for (int cpu = 0; cpu < kMaxCpus; ++cpu) {
    if (CPU_ISSET_S(cpu, size, set.get())) cpus.push_back(cpu);
  }
  return cpus;
}

bool pinCurrentThreadToCpus(const std::vector<int>& cpus) {
  std::vector<int> allowed = allowedCpus();
  std::vector<int> wanted(cpus);
  std::sort(wanted.begin(), wanted.end());
  std::vector<int> target;
  std::set_intersection(wanted.begin(), wanted.end(), allowed.begin(), allowed.end(),
                        std::back_inserter(target));
  if (target.empty()) {
    XCCL_INFO("topo", "not pinning: none of CPUs ", formatCpuList(cpus),
              " is in this thread's allowed set ", formatCpuList(allowed));
    return false;
  }
  std::unique_ptr<cpu_set_t, CpuSetDeleter> set(CPU_ALLOC(kMaxCpus));
  size_t size = CPU_ALLOC_SIZE(kMaxCpus);
  CPU_ZERO_S(size, set.get());
  for (int cpu : target) {
    if (cpu < kMaxCpus) CPU_SET_S(cpu, size, set.get());
  }
  // With pid 0, sched_setaffinity applies to the calling thread only, not the whole process.
  if (::sched_setaffinity(0, size, set.get()) != 0) {
    XCCL_WARN("topo", "pinning to CPUs ", formatCpuList(target), " failed: ", errnoText(errno));
    return false;
  }
  return true;
}

}  // namespace xccl::topo
