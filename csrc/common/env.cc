#include "common/env.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>

#include "common/error.h"

namespace xccl::env {
namespace {

// Keep in sync with docs/environment.md (tests/python/test_docs.py checks it).
const std::vector<Variable> kVariables = {
    {"XCCL_LOG_LEVEL", "warn", "Log verbosity: error, warn, info, debug."},
    {"XCCL_SOCKET_IFNAME", "",
     "Interface (or comma-separated list) whose address the TCP transport listens on; default: "
     "the address that reaches the store's host, else the hostname's address."},
    {"XCCL_CONNECT_TIMEOUT_MS", "",
     "Bound for building the TCP mesh at group creation; default: the group timeout."},
    {"XCCL_ALGO", "",
     "Force an algorithm for every collective that has it: direct or ring (TCP, even where "
     "shared memory is available), shm (shared memory where every rank is on one host), auto; "
     "unknown names are rejected at group creation."},
    {"XCCL_RING_CHUNK_BYTES", "524288",
     "Pipelining chunk of the ring algorithms, in bytes (measured best on loopback TCP)."},
    {"XCCL_SMALL_MSG_BYTES", "65536",
     "Messages at or below this use the latency algorithms (direct exchange) instead of rings."},
    {"XCCL_SHM_DISABLE", "0",
     "1 on any rank: the group's collectives use TCP even when every rank is on one host."},
    {"XCCL_SHM_SLOT_BYTES", "",
     "Bytes of one shared-memory slot (each rank has two); default: 4 MiB, reduced to fit in "
     "half of /dev/shm's free space."},
    {"XCCL_SHM_HOST_ID", "",
     "Which host this rank counts as when deciding which ranks share memory (for testing "
     "multi-host groups on one machine); default: hostname and boot id."},
    {"XCCL_SHM_TWO_SHOT_BYTES", "",
     "Shared-memory all_reduce/reduce messages from this many bytes on use two-shot instead of "
     "one-shot, at 4 ranks (scaled for other world sizes, docs/shm.md); 0: always two-shot; "
     "default: the measured 2 MiB."},
    {"XCCL_TOPO_FILE", "",
     "Load the machine topology from this JSON file (docs/topology.md) instead of probing "
     "sysfs, NVML and KFD; for VMs that hide the real topology and for planning offline."},
    {"XCCL_TOPO_DUMP_FILE", "",
     "Write the topology xccl found (or loaded) to this JSON file, for bug reports and for "
     "editing into an XCCL_TOPO_FILE."},
    {"XCCL_PIN_PROGRESS", "1",
     "0: leave transport progress threads where the scheduler puts them instead of pinning them "
     "to the CPUs near the NIC (or GPU) they serve."},
    {"XCCL_GPU_ALGO", "",
     "Force the GPU plan (docs/algorithms.md): auto, nccl (also rccl, vendor), kernel, "
     "one_shot, two_shot, all_pairs; applies to every GPU collective that can run it."},
    {"XCCL_GPU_WORKSPACE_BYTES", "33554432",
     "Bytes of each rank's GPU workspace (device memory peers read through CUDA IPC, allocated "
     "by a group's first GPU collective). all_reduce and broadcast run larger messages in "
     "chunks of this size; all_gather, reduce_scatter and all_to_all with a larger per-rank "
     "input go to NCCL/RCCL (or host memory when ranks share a GPU)."},
};

std::mutex gMutex;
std::map<std::string, std::string> gCache;

const Variable& find(const char* name) {
  auto it = std::find_if(kVariables.begin(), kVariables.end(),
                         [&](const Variable& v) { return std::string(v.name) == name; });
  XCCL_CHECK(it != kVariables.end(), "environment variable ", name, " is not declared in env.cc");
  return *it;
}

}  // namespace

const std::vector<Variable>& all() { return kVariables; }

std::string getString(const char* name) {
  const Variable& var = find(name);
  std::lock_guard<std::mutex> guard(gMutex);
  auto it = gCache.find(name);
  if (it != gCache.end()) return it->second;
  const char* raw = std::getenv(name);
  std::string value = (raw != nullptr && raw[0] != '\0') ? raw : var.defaultValue;
  gCache.emplace(name, value);
  return value;
}

int64_t getInt(const char* name) {
  std::string value = getString(name);
  XCCL_CHECK_ARG(!value.empty(), name, " is not set and has no default");
  try {
    size_t used = 0;
    int64_t parsed = std::stoll(value, &used, 0);
    XCCL_CHECK_ARG(used == value.size(), name, "=", value, " is not an integer");
    return parsed;
  } catch (const std::logic_error&) {
    XCCL_THROW(ErrorKind::kInvalidArgument, name, "=", value, " is not an integer");
  }
}

bool getBool(const char* name) {
  std::string value = getString(name);
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value.empty() || value == "0" || value == "false" || value == "no" || value == "off") {
    return false;
  }
  XCCL_THROW(ErrorKind::kInvalidArgument, name, "=", value, " is not a boolean");
}

}  // namespace xccl::env
