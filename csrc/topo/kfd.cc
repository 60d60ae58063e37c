#include "topo/kfd.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace xccl::topo {
namespace {

constexpr const char* kKfdNodes = "/sys/class/kfd/kfd/topology/nodes";

// A KFD "properties" file: one "key value" pair per line, values decimal.
std::map<std::string, int64_t> readProperties(const Sysfs& sysfs, const std::string& path) {
  std::map<std::string, int64_t> properties;
  auto text = sysfs.readAll(path, 64 * 1024);
  if (!text) return properties;
  std::istringstream lines(*text);
  std::string key;
  long long value = 0;
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    if (fields >> key >> value) properties[key] = value;
  }
  return properties;
}

int64_t get(const std::map<std::string, int64_t>& properties, const char* key) {
  auto it = properties.find(key);
  return it == properties.end() ? 0 : it->second;
}

bool isNumber(const std::string& name) {
  return !name.empty() && name.size() < 9 &&
         std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string gfxArchName(int64_t gfxTargetVersion) {
  if (gfxTargetVersion <= 0) return "";
  int64_t major = gfxTargetVersion / 10000;
  int64_t minor = (gfxTargetVersion / 100) % 100;
  int64_t stepping = gfxTargetVersion % 100;
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "gfx%lld%llx%llx", static_cast<long long>(major),
                static_cast<long long>(minor), static_cast<long long>(stepping));
  return buffer;
}

std::vector<KfdGpuNode> readKfdGpuNodes(const Sysfs& sysfs) {
  std::vector<std::string> names = sysfs.list(kKfdNodes);
  names.erase(std::remove_if(names.begin(), names.end(),
                             [](const auto& n) { return !isNumber(n); }),
              names.end());
  std::sort(names.begin(), names.end(),
            [](const std::string& a, const std::string& b) { return std::stoi(a) < std::stoi(b); });
  std::vector<KfdGpuNode> nodes;
  for (const std::string& name : names) {
    std::string dir = std::string(kKfdNodes) + "/" + name;
    auto properties = readProperties(sysfs, dir + "/properties");
    if (get(properties, "simd_count") <= 0) continue;  // a CPU node
    KfdGpuNode node;
    node.node = std::stoi(name);
    // location_id packs bus (bits 15:8), device (7:3) and function (2:0).
    int64_t location = get(properties, "location_id");
    char busId[32];
    std::snprintf(busId, sizeof(busId), "%04llx:%02llx:%02llx.%llx",
                  static_cast<long long>(get(properties, "domain") & 0xffff),
                  static_cast<long long>((location >> 8) & 0xff),
                  static_cast<long long>((location >> 3) & 0x1f),
                  static_cast<long long>(location & 0x7));
    node.busId = busId;
    node.arch = gfxArchName(get(properties, "gfx_target_version"));
    for (const std::string& bank : sysfs.list(dir + "/mem_banks")) {
      node.memoryBytes +=
          get(readProperties(sysfs, dir + "/mem_banks/" + bank + "/properties"), "size_in_bytes");
    }
    for (const std::string& link : sysfs.list(dir + "/io_links")) {
      auto values = readProperties(sysfs, dir + "/io_links/" + link + "/properties");
      KfdIoLink io;
      io.type = static_cast<int>(get(values, "type"));
      io.nodeTo = static_cast<int>(values.count("node_to") ? get(values, "node_to") : -1);
      io.weight = static_cast<int>(get(values, "weight"));
      io.minBandwidthMBps = get(values, "min_bandwidth");
      io.maxBandwidthMBps = get(values, "max_bandwidth");
      node.links.push_back(io);
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

void addXgmiLinks(const std::vector<KfdGpuNode>& nodes, Topology& topology) {
  std::map<int, int> gpuOfNode;  // KFD node id -> Topology GPU index
  for (const KfdGpuNode& node : nodes) {
    for (const Gpu& gpu : topology.gpus) {
      if (gpu.pciBusId == node.busId) gpuOfNode[node.node] = gpu.index;
    }
  }
  std::map<std::pair<int, int>, GpuLink> pairs;
  for (const KfdGpuNode& node : nodes) {
    auto from = gpuOfNode.find(node.node);
    if (from == gpuOfNode.end()) continue;
    for (const KfdIoLink& io : node.links) {
      auto to = gpuOfNode.find(io.nodeTo);
      if (io.type != kKfdLinkXgmi || to == gpuOfNode.end() || to->second == from->second) {
        continue;
      }
      int a = std::min(from->second, to->second);
      int b = std::max(from->second, to->second);
      int count = 1;
      if (io.minBandwidthMBps > 0 && io.maxBandwidthMBps >= io.minBandwidthMBps) {
        count = static_cast<int>(io.maxBandwidthMBps / io.minBandwidthMBps);
      }
      GpuLink link;
      link.gpuA = a;
      link.gpuB = b;
      link.type = LinkType::kXgmi;
      link.count = count;
      link.bandwidthGBps = static_cast<double>(io.maxBandwidthMBps) / 1000.0;
      // Each direction is listed once per endpoint; keep the larger report if they disagree.
      auto [it, inserted] = pairs.emplace(std::make_pair(a, b), link);
      if (!inserted && link.count > it->second.count) it->second = link;
    }
  }
  for (const auto& entry : pairs) topology.gpuLinks.push_back(entry.second);
}

}  // namespace xccl::topo
