// discoverFromRoot(): runs the probes in dependency order (NUMA nodes first: GPU and NIC
// placement falls back on them).
#include <unistd.h>

#include "topo/cpu_probe.h"
#include "topo/gpu_probe.h"
#include "topo/nic_probe.h"
#include "topo/pci.h"
#include "topo/sysfs.h"
#include "topo/topology.h"

namespace xccl::topo {

Topology discoverFromRoot(const std::string& sysfsRoot, const DiscoverOptions& options) {
  Sysfs sysfs(sysfsRoot);
  Topology topology;
  topology.hostName = options.hostName;
  if (topology.hostName.empty()) {
    // procfs first so a fake tree can name its host; the syscall for the real one.
    topology.hostName = sysfs.readLine("/proc/sys/kernel/hostname").value_or("");
  }
  if (topology.hostName.empty()) {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) == 0) topology.hostName = name;
  }
  probeCpus(sysfs, topology);
  std::vector<std::string> probes = {"sysfs"};
  probeGpus(sysfs, scanPci(sysfs), options, topology, probes);
  probeNics(sysfs, options, topology);
  for (size_t i = 0; i < probes.size(); ++i) topology.source += (i ? "+" : "") + probes[i];
  return topology;
}

}  // namespace xccl::topo
