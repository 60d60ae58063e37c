#include "topo/topology.h"

#include <algorithm>
#include <set>
#include <utility>

#include "common/env.h"
#include "common/error.h"
#include "common/files.h"
#include "common/logging.h"
#include "topo/json.h"
#include "topo/sysfs.h"

namespace xccl::topo {
namespace {

template <typename Enum, size_t N>
Enum enumFromName(const std::pair<Enum, const char*> (&table)[N], const std::string& name,
                  const char* what) {
  for (const auto& entry : table) {
    if (name == entry.second) return entry.first;
  }
  XCCL_THROW(ErrorKind::kInvalidArgument, "unknown ", what, " \"", name, "\"");
}

template <typename Enum, size_t N>
const char* enumName(const std::pair<Enum, const char*> (&table)[N], Enum value) {
  for (const auto& entry : table) {
    if (value == entry.first) return entry.second;
  }
  return "?";
}

const std::pair<GpuVendor, const char*> kVendorNames[] = {{GpuVendor::kNvidia, "nvidia"},
                                                          {GpuVendor::kAmd, "amd"},
                                                          {GpuVendor::kOther, "other"}};
const std::pair<LinkType, const char*> kLinkNames[] = {{LinkType::kNvlink, "nvlink"},
                                                       {LinkType::kNvswitch, "nvswitch"},
                                                       {LinkType::kXgmi, "xgmi"},
                                                       {LinkType::kPcie, "pcie"}};
const std::pair<PciPath, const char*> kPathNames[] = {
    {PciPath::kPix, "PIX"},   {PciPath::kPxb, "PXB"}, {PciPath::kPhb, "PHB"},
    {PciPath::kNode, "NODE"}, {PciPath::kSys, "SYS"}, {PciPath::kUnknown, "unknown"}};
const std::pair<NicKind, const char*> kNicNames[] = {{NicKind::kEthernet, "ethernet"},
                                                     {NicKind::kInfiniband, "infiniband"},
                                                     {NicKind::kRoce, "roce"},
                                                     {NicKind::kEfa, "efa"},
                                                     {NicKind::kOther, "other"}};

Json intArray(const std::vector<int>& values) {
  Json array = Json::array();
  for (int value : values) array.push(value);
  return array;
}

// Readers of optional members: an absent member keeps the default; a present one must have the
// right kind (a typo'd value is an error, not silently ignored).
std::string optString(const Json& object, const char* key, const std::string& fallback = "") {
  const Json* value = object.find(key);
  return value ? value->asString(key) : fallback;
}

int64_t optInt(const Json& object, const char* key, int64_t fallback) {
  const Json* value = object.find(key);
  return value ? value->asInt(key) : fallback;
}

// Ids, counts and distances: a file's 2^32 must not read as 0.
int smallInt(int64_t value, const char* key) {
  XCCL_CHECK_ARG(value >= -1 && value <= (1 << 24), key, "=", value, " is out of range");
  return static_cast<int>(value);
}

int optSmallInt(const Json& object, const char* key, int fallback) {
  return smallInt(optInt(object, key, fallback), key);
}

bool optBool(const Json& object, const char* key, bool fallback) {
  const Json* value = object.find(key);
  return value ? value->asBool(key) : fallback;
}

std::vector<int> optCpus(const Json& object, const char* key) {
  return parseCpuList(optString(object, key));
}

const std::vector<Json>& optArray(const Json& object, const char* key) {
  static const std::vector<Json> kEmpty;
  const Json* value = object.find(key);
  return value ? value->asArray(key) : kEmpty;
}

// Where a PCI device sits, the same members in a Gpu and a Nic.
template <typename Device, typename Visitor>
void placeMembers(Device& device, Visitor& v) {
  v.plain("pciBusId", device.pciBusId);
  v.plain("pciPath", device.pciPath);
  v.small("numaNode", device.numaNode);
  v.cpus("cpus", device.cpus);
}

// Gpu's and Nic's members with their JSON names, listed once for both directions: the visitor
// is a JsonWriter (serialise) or a JsonReader (parse, an absent member keeping its default).
template <typename G, typename Visitor>
void gpuMembers(G& gpu, Visitor& v) {
  v.small("index", gpu.index);
  v.enumeration("vendor", gpu.vendor, kVendorNames, "GPU vendor");
  v.plain("name", gpu.name);
  v.plain("arch", gpu.arch);
  placeMembers(gpu, v);
  v.plain("memoryBytes", gpu.memoryBytes);
  v.small("nvswitchLinks", gpu.nvswitchLinks);
}

template <typename N, typename Visitor>
void nicMembers(N& nic, Visitor& v) {
  v.plain("name", nic.name);
  v.enumeration("kind", nic.kind, kNicNames, "NIC kind");
  v.small("port", nic.port);
  v.plain("netdev", nic.netdev);
  v.plain("driver", nic.driver);
  placeMembers(nic, v);
  v.plain("speedMbps", nic.speedMbps);
  v.plain("up", nic.up);
  v.small("mtu", nic.mtu);
  v.plain("virtual", nic.isVirtual);
}

struct JsonWriter {
  Json out = Json::object();
  template <typename T>
  void plain(const char* key, const T& value) {
    out.set(key, value);
  }
  void small(const char* key, int value) { out.set(key, value); }
  void cpus(const char* key, const std::vector<int>& cpus) { out.set(key, formatCpuList(cpus)); }
  template <typename Enum, size_t N>
  void enumeration(const char* key, Enum value, const std::pair<Enum, const char*> (&table)[N],
                   const char*) {
    out.set(key, enumName(table, value));
  }
};

struct JsonReader {
  const Json& in;
  void plain(const char* key, std::string& value) { value = optString(in, key, value); }
  void plain(const char* key, int64_t& value) { value = optInt(in, key, value); }
  void plain(const char* key, bool& value) { value = optBool(in, key, value); }
  void small(const char* key, int& value) { value = optSmallInt(in, key, value); }
  void cpus(const char* key, std::vector<int>& cpus) { cpus = optCpus(in, key); }
  template <typename Enum, size_t N>
  void enumeration(const char* key, Enum& value, const std::pair<Enum, const char*> (&table)[N],
                   const char* what) {
    value = enumFromName(table, optString(in, key, enumName(table, value)), what);
  }
};

Json gpuToJson(const Gpu& gpu) {
  JsonWriter writer;
  gpuMembers(gpu, writer);
  return std::move(writer.out);
}

Json nicToJson(const Nic& nic) {
  JsonWriter writer;
  nicMembers(nic, writer);
  Json addresses = Json::array();
  for (const auto& address : nic.addresses) addresses.push(address);
  writer.out.set("addresses", std::move(addresses));
  return std::move(writer.out);
}

Gpu gpuFromJson(const Json& in, size_t position) {
  Gpu gpu;
  gpu.index = static_cast<int>(position);  // the default when absent
  JsonReader reader{in};
  gpuMembers(gpu, reader);
  XCCL_CHECK_ARG(gpu.index == static_cast<int>(position), "gpus[", position, "] has index ",
                 gpu.index, ": GPUs must be listed in index order starting at 0");
  return gpu;
}

Nic nicFromJson(const Json& in) {
  Nic nic;
  JsonReader reader{in};
  nicMembers(nic, reader);
  XCCL_CHECK_ARG(!nic.name.empty(), "a NIC has no name");
  for (const Json& address : optArray(in, "addresses")) {
    nic.addresses.push_back(address.asString("addresses[]"));
  }
  return nic;
}

// References between sections must resolve so consumers can index without checks.
void validate(const Topology& topology) {
  std::set<int> numaIds;
  for (const NumaNode& node : topology.numaNodes) {
    XCCL_CHECK_ARG(node.id >= 0, "NUMA node id ", node.id, " is negative");
    XCCL_CHECK_ARG(numaIds.insert(node.id).second, "NUMA node ", node.id, " is listed twice");
    XCCL_CHECK_ARG(node.distances.empty() || node.distances.size() == topology.numaNodes.size(),
                   "NUMA node ", node.id, " has ", node.distances.size(), " distances for ",
                   topology.numaNodes.size(), " nodes");
  }
  auto checkNuma = [&](int numa, const std::string& who) {
    XCCL_CHECK_ARG(numa == -1 || numaIds.count(numa) == 1, who, " is on NUMA node ", numa,
                   ", which is not listed");
  };
  for (const Gpu& gpu : topology.gpus) checkNuma(gpu.numaNode, "GPU " + std::to_string(gpu.index));
  for (const Nic& nic : topology.nics) checkNuma(nic.numaNode, "NIC " + nic.name);
  const int gpuCount = static_cast<int>(topology.gpus.size());
  std::set<std::pair<int, int>> pairs;
  for (const GpuLink& link : topology.gpuLinks) {
    XCCL_CHECK_ARG(link.gpuA >= 0 && link.gpuB < gpuCount && link.gpuA < link.gpuB, "GPU link [",
                   link.gpuA, ", ", link.gpuB, "] does not name two of the ", gpuCount, " GPUs");
    XCCL_CHECK_ARG(pairs.emplace(link.gpuA, link.gpuB).second, "GPU link [", link.gpuA, ", ",
                   link.gpuB, "] is listed twice");
    XCCL_CHECK_ARG(link.count >= 0 && link.bandwidthGBps >= 0, "GPU link [", link.gpuA, ", ",
                   link.gpuB, "] has a negative count or bandwidth");
  }
}

}  // namespace

const char* gpuVendorName(GpuVendor vendor) { return enumName(kVendorNames, vendor); }
const char* linkTypeName(LinkType type) { return enumName(kLinkNames, type); }
const char* pciPathName(PciPath path) { return enumName(kPathNames, path); }
const char* nicKindName(NicKind kind) { return enumName(kNicNames, kind); }

std::string toJson(const Topology& topology) {
  Json root = Json::object();
  root.set("format", kFormatName);
  root.set("version", kFormatVersion);
  root.set("host", topology.hostName);
  root.set("source", topology.source);
  root.set("virtualMachine", topology.virtualMachine);
  root.set("cpuModel", topology.cpuModel);
  root.set("cpus", formatCpuList(topology.cpus));
  Json nodes = Json::array();
  for (const NumaNode& node : topology.numaNodes) {
    Json out = Json::object();
    out.set("id", node.id);
    out.set("cpus", formatCpuList(node.cpus));
    out.set("distances", intArray(node.distances));
    out.set("memoryBytes", node.memoryBytes);
    nodes.push(std::move(out));
  }
  root.set("numaNodes", std::move(nodes));
  Json gpus = Json::array();
  for (const Gpu& gpu : topology.gpus) gpus.push(gpuToJson(gpu));
  root.set("gpus", std::move(gpus));
  Json links = Json::array();
  for (const GpuLink& link : topology.gpuLinks) {
    Json out = Json::object();
    out.set("gpus", intArray({link.gpuA, link.gpuB}));
    out.set("type", linkTypeName(link.type));
    out.set("count", link.count);
    out.set("bandwidthGBps", link.bandwidthGBps);
    out.set("pciPath", pciPathName(link.pciPath));
    links.push(std::move(out));
  }
  root.set("gpuLinks", std::move(links));
  Json nics = Json::array();
  for (const Nic& nic : topology.nics) nics.push(nicToJson(nic));
  root.set("nics", std::move(nics));
  return root.dump();
}

Topology fromJson(const std::string& text) {
  Json root = Json::parse(text);
  XCCL_CHECK_ARG(root.kind() == Json::Kind::kObject, "a topology file must hold a JSON object");
  XCCL_CHECK_ARG(optString(root, "format") == kFormatName,
                 "not an xccl topology file (\"format\" must be \"", kFormatName, "\")");
  const Json* version = root.find("version");
  XCCL_CHECK_ARG(version != nullptr, "the topology file has no \"version\"");
  int64_t number = version->asInt("version");
  XCCL_CHECK_ARG(number == kFormatVersion, "topology file version ", number,
                 " is not supported (this xccl reads version ", kFormatVersion, ")");
  Topology topology;
  topology.hostName = optString(root, "host");
  topology.source = optString(root, "source");
  topology.virtualMachine = optBool(root, "virtualMachine", false);
  topology.cpuModel = optString(root, "cpuModel");
  topology.cpus = optCpus(root, "cpus");
  for (const Json& in : optArray(root, "numaNodes")) {
    NumaNode node;
    node.id = optSmallInt(in, "id", 0);
    node.cpus = optCpus(in, "cpus");
    for (const Json& d : optArray(in, "distances")) {
      node.distances.push_back(smallInt(d.asInt("distances[]"), "distances[]"));
    }
    node.memoryBytes = optInt(in, "memoryBytes", 0);
    topology.numaNodes.push_back(std::move(node));
  }
  const auto& gpus = optArray(root, "gpus");
  for (size_t i = 0; i < gpus.size(); ++i) topology.gpus.push_back(gpuFromJson(gpus[i], i));
  for (const Json& in : optArray(root, "gpuLinks")) {
    const Json* ends = in.find("gpus");
    XCCL_CHECK_ARG(ends != nullptr && ends->asArray("gpus").size() == 2,
                   "a GPU link needs \"gpus\": [a, b]");
    GpuLink link;
    int a = smallInt(ends->asArray("gpus")[0].asInt("gpus[0]"), "gpus[0]");
    int b = smallInt(ends->asArray("gpus")[1].asInt("gpus[1]"), "gpus[1]");
    link.gpuA = std::min(a, b);
    link.gpuB = std::max(a, b);
    link.type = enumFromName(kLinkNames, optString(in, "type"), "GPU link type");
    link.count = optSmallInt(in, "count", 0);
    const Json* bandwidth = in.find("bandwidthGBps");
    link.bandwidthGBps = bandwidth ? bandwidth->asDouble("bandwidthGBps") : 0.0;
    link.pciPath = enumFromName(kPathNames, optString(in, "pciPath", "unknown"), "PCIe path");
    topology.gpuLinks.push_back(link);
  }
  for (const Json& in : optArray(root, "nics")) topology.nics.push_back(nicFromJson(in));
  validate(topology);
  return topology;
}

Topology loadTopologyFile(const std::string& path) {
  // A file the user names (XCCL_TOPO_FILE, --topology): read as any named file is, so a FIFO or
  // a link cannot stall or redirect a group's creation.
  const std::string text =
      files::readRegularFile(path, kMaxTopologyFileBytes, "the topology file " + path);
  try {
    return fromJson(text);
  } catch (const Error& error) {
    XCCL_THROW(error.kind(), "topology file ", path, ": ", error.what());
  }
}

void writeTopologyFile(const Topology& topology, const std::string& path) {
  // XCCL_TOPO_DUMP_FILE is often a name in a shared folder: a link planted there is not followed.
  files::writeRegularFile(path, toJson(topology), "the topology file " + path);
}

Topology discover() {
  // Function-local static: probed once, thread-safe; a throwing probe is retried next call.
  static const Topology cached = [] {
    std::string file = env::getString("XCCL_TOPO_FILE");
    Topology topology;
    if (!file.empty()) {
      topology = loadTopologyFile(file);
      XCCL_INFO("topo", "loaded the topology from ", file, " (XCCL_TOPO_FILE)");
    } else {
      topology = discoverFromRoot("/");
    }
    std::string dump = env::getString("XCCL_TOPO_DUMP_FILE");
    if (!dump.empty()) {
      // A diagnostic aid: a path we cannot write must not stop the job.
      try {
        writeTopologyFile(topology, dump);
      } catch (const Error& error) {
        XCCL_WARN("topo", "XCCL_TOPO_DUMP_FILE: ", error.what());
      }
    }
    return topology;
  }();
  return cached;
}

}  // namespace xccl::topo
