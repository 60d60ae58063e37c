#include "topo/affinity.h"

#include <algorithm>

#include "common/error.h"
#include "common/thread_affinity.h"
#include "topo/sysfs.h"

namespace xccl::topo {
namespace {

std::vector<int> nearCpus(const Topology& topology, const std::vector<int>& localCpus,
                          int numaNode) {
  if (!localCpus.empty()) return localCpus;
  std::vector<int> node = cpusOfNumaNode(topology, numaNode);
  return node.empty() ? topology.cpus : node;
}

// "10.0.0.5:29500" -> "10.0.0.5", "[fe80::1]:0" -> "fe80::1"; bare addresses pass through (an
// IPv6 address has several colons, so a single colon can only separate a port).
std::string hostOfAddress(const std::string& address) {
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find(']');
    return address.substr(1, close == std::string::npos ? std::string::npos : close - 1);
  }
  size_t colon = address.find(':');
  if (colon != std::string::npos && address.find(':', colon + 1) == std::string::npos) {
    return address.substr(0, colon);
  }
  return address;
}

// True when `cpus` says nothing beyond "anywhere": empty, or every online CPU (when those are
// listed at all).
bool coversEveryCpu(const Topology& topology, const std::vector<int>& cpus) {
  if (cpus.empty()) return true;
  if (topology.cpus.empty()) return false;
  std::vector<int> sorted(cpus);
  std::sort(sorted.begin(), sorted.end());
  return std::includes(sorted.begin(), sorted.end(), topology.cpus.begin(), topology.cpus.end());
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

int nicIndexByAddress(const Topology& topology, const std::string& address) {
  const std::string host = hostOfAddress(address);
  if (host.empty()) return -1;
  for (size_t i = 0; i < topology.nics.size(); ++i) {
    const std::vector<std::string>& held = topology.nics[i].addresses;
    if (std::find(held.begin(), held.end(), host) != held.end()) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int> progressCpusFor(const Topology& topology, int gpu, const std::string& nic) {
  if (!nic.empty()) {
    int index = nicIndexByName(topology, nic);
    if (index < 0) index = nicIndexByAddress(topology, nic);
    if (index >= 0) {
      std::vector<int> cpus = cpusNearNic(topology, index);
      if (!coversEveryCpu(topology, cpus)) return cpus;
    }
  }
  if (gpu >= 0 && gpu < static_cast<int>(topology.gpus.size())) {
    std::vector<int> cpus = cpusNearGpu(topology, gpu);
    if (!coversEveryCpu(topology, cpus)) return cpus;
  }
  return {};
}

std::vector<int> allowedCpus() { return affinity::allowedCpus(); }

bool pinCurrentThreadToCpus(const std::vector<int>& cpus) {
  return affinity::pinCurrentThread(cpus);
}

}  // namespace xccl::topo
