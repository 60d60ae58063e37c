#include "topo/cpu_probe.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace xccl::topo {
namespace {

bool parseNodeId(const std::string& name, int& id) {
  if (name.size() <= 4 || name.compare(0, 4, "node") != 0) return false;
  for (size_t i = 4; i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  }
  if (name.size() > 10) return false;
  id = std::stoi(name.substr(4));
  return true;
}

std::vector<int> safeCpuList(const std::optional<std::string>& text) {
  if (!text) return {};
  try {
    return parseCpuList(*text);
  } catch (const std::exception&) {
    return {};
  }
}

int64_t nodeMemoryBytes(const Sysfs& sysfs, const std::string& nodeDir) {
  // "Node 0 MemTotal:       263856844 kB"
  auto text = sysfs.readAll(nodeDir + "/meminfo", 64 * 1024);
  if (!text) return 0;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    size_t key = line.find("MemTotal:");
    if (key == std::string::npos) continue;
    std::istringstream fields(line.substr(key + 9));
    int64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return 0;
}

void probeCpuInfo(const Sysfs& sysfs, Topology& topology) {
  // The first processor's block is enough; the file is large on many-core machines.
  auto text = sysfs.readAll("/proc/cpuinfo", 256 * 1024);
  if (text) {
    std::istringstream lines(*text);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty()) break;
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string key = line.substr(0, colon);
      key.erase(key.find_last_not_of(" \t") + 1);
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      if (key == "model name" && topology.cpuModel.empty()) topology.cpuModel = value;
      // x86 guests see the CPUID hypervisor bit as the "hypervisor" flag.
      if (key == "flags" && (" " + value + " ").find(" hypervisor ") != std::string::npos) {
        topology.virtualMachine = true;
      }
    }
  }
  // Xen (and some others) also announce themselves here, on any architecture.
  if (sysfs.readLine("/sys/hypervisor/type").value_or("") != "") topology.virtualMachine = true;
}

}  // namespace

void probeCpus(const Sysfs& sysfs, Topology& topology) {
  topology.cpus = safeCpuList(sysfs.readLine("/sys/devices/system/cpu/online"));
  probeCpuInfo(sysfs, topology);

  std::vector<int> ids;
  for (const std::string& name : sysfs.list("/sys/devices/system/node")) {
    int id = 0;
    if (parseNodeId(name, id)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  for (int id : ids) {
    std::string dir = "/sys/devices/system/node/node" + std::to_string(id);
    NumaNode node;
    node.id = id;
    node.cpus = safeCpuList(sysfs.readLine(dir + "/cpulist"));
    std::istringstream distances(sysfs.readLine(dir + "/distance").value_or(""));
    int distance = 0;
    while (distances >> distance) node.distances.push_back(distance);
    if (node.distances.size() != ids.size()) node.distances.clear();  // offline nodes in between
    node.memoryBytes = nodeMemoryBytes(sysfs, dir);
    topology.numaNodes.push_back(std::move(node));
  }
  if (topology.numaNodes.empty()) {
    NumaNode node;
    node.cpus = topology.cpus;
    node.distances = {10};
    topology.numaNodes.push_back(std::move(node));
  }
  if (topology.cpus.empty()) {
    for (const NumaNode& node : topology.numaNodes) {
      topology.cpus.insert(topology.cpus.end(), node.cpus.begin(), node.cpus.end());
    }
    std::sort(topology.cpus.begin(), topology.cpus.end());
  }
}

int numaNodeFromCpus(const Topology& topology, const std::vector<int>& cpus) {
  if (cpus.empty() || topology.numaNodes.size() < 2) return -1;
  for (const NumaNode& node : topology.numaNodes) {
    bool containsAll = std::all_of(cpus.begin(), cpus.end(), [&](int cpu) {
      return std::binary_search(node.cpus.begin(), node.cpus.end(), cpu);
    });
    if (containsAll) return node.id;
  }
  return -1;
}

}  // namespace xccl::topo
