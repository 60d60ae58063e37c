#include "common/env.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>

#include "common/error.h"
#include "common/vocabulary.h"

namespace xccl::env {
namespace {

constexpr bool kGroupWide = true, kPerRank = false;
constexpr int64_t kKiB = 1024, kMiB = 1024 * kKiB, kGiB = 1024 * kMiB, kTiB = 1024 * kGiB;
// Byte counts with no tighter bound stop at 1 TiB: more than any one host's or GPU's memory, and
// small enough that products with any world size stay far inside 64 bits.
constexpr int64_t kMaxBytes = kTiB;

Variable declare(const char* name, const char* defaultValue, Kind kind, const char* meaning) {
  Variable v;
  v.name = name;
  v.defaultValue = defaultValue;
  v.meaning = meaning;
  v.kind = kind;
  return v;
}

Variable text(const char* name, const char* meaning) {
  return declare(name, "", Kind::kText, meaning);
}

Variable integer(const char* name, const char* defaultValue, int64_t min, int64_t max,
                 int64_t multipleOf, bool groupWide, const char* meaning) {
  Variable v = declare(name, defaultValue, Kind::kInteger, meaning);
  v.min = min;
  v.max = max;
  v.multipleOf = multipleOf;
  v.groupWide = groupWide;
  return v;
}

Variable boolean(const char* name, const char* defaultValue, const char* meaning) {
  return declare(name, defaultValue, Kind::kBoolean, meaning);
}

// A boolean every rank of a group must set alike (Variable::groupWide).
Variable boolean(const char* name, const char* defaultValue, bool groupWide, const char* meaning) {
  Variable v = boolean(name, defaultValue, meaning);
  v.groupWide = groupWide;
  return v;
}

Variable choice(const char* name, const char* defaultValue, std::vector<std::string> choices,
                bool groupWide, const char* meaning) {
  Variable v = declare(name, defaultValue, Kind::kChoice, meaning);
  v.choices = std::move(choices);
  v.groupWide = groupWide;
  return v;
}

// A byte threshold per collective (Kind::kBytesPerCollective) for `collectives`, each 0 to `max`.
Variable thresholds(const char* name, std::vector<vocab::Collective> collectives, int64_t max,
                    bool groupWide, const char* meaning) {
  Variable v = declare(name, "", Kind::kBytesPerCollective, meaning);
  v.max = max;
  v.collectives = std::move(collectives);
  v.groupWide = groupWide;
  return v;
}

// XCCL_SHM_CMA_MIN_BYTES's collectives: those with a shared-memory single copy.
std::vector<vocab::Collective> shmSingleCopyCollectives() {
  return {std::begin(vocab::kShmSingleCopyCollectives), std::end(vocab::kShmSingleCopyCollectives)};
}

// XCCL_ALGO's choices: the algorithms the plan vocabulary lets a user force.
std::vector<std::string> forceableAlgorithms() {
  std::vector<std::string> names;
  for (const vocab::AlgorithmRow& row : vocab::kAlgorithmRows) {
    if (row.forceable) names.emplace_back(row.name);
  }
  return names;
}

// XCCL_GPU_ALGO's choices: each GpuForce's name, then its synonyms ("nccl|rccl|vendor").
std::vector<std::string> gpuForceChoices() {
  std::vector<std::string> entries;
  for (const vocab::GpuForceRow& row : vocab::kGpuForceRows) {
    std::string entry = row.name;
    for (const char* synonym : row.synonyms) {
      if (synonym != nullptr) entry += std::string("|") + synonym;
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

// Keep in sync with docs/environment.md: tests/python/test_env_defaults.py checks the names,
// tests/cpp/common/test_env.cc the defaults and accepted values. Each range says why it stops
// where it does; the readers (grep the name) rely on these bounds instead of re-checking.
const std::vector<Variable> kVariables = {
    // common/logging.cc compares exactly these four.
    choice("XCCL_LOG_LEVEL", "warn", {"error", "warn", "info", "debug"}, kPerRank,
           "Log verbosity: error, warn, info, debug."),
    text("XCCL_SOCKET_IFNAME",
         "Interface (or comma-separated list of alternatives: the first that exists) whose "
         "address the TCP transport listens on; set alone it is also the only interface TCP "
         "links run over, as if XCCL_NET_IFNAMES named it. Default: the address that reaches the "
         "store's host, else the hostname's address."),
    text("XCCL_NET_IFNAMES",
         "Comma-separated interfaces xccl's network engines use between hosts (each must exist "
         "and have an IPv4 address, else group creation raises ValueError); TCP links run over "
         "each one a peer shares. Default: chosen as for XCCL_SOCKET_IFNAME, plus every other up "
         "interface on a subnet the peer also has."),
    // net/transport/factory.cc chooseEngine(); ranks on different engines could not reach each
    // other.
    choice("XCCL_NET", "auto", {"auto", "ofi", "tcp"}, kGroupWide,
           "Network engine to ranks on other hosts: tcp (xccl's own), ofi (libfabric; an error "
           "when this build has none), auto (ofi where an RDMA provider is present, else tcp). "
           "Ranks on the same host use shared memory either way unless XCCL_SHM_DISABLE is set."),
    // At least 1 ms (to c10d stores 0 means "no bound"); at most what poll() takes as an int.
    integer("XCCL_CONNECT_TIMEOUT_MS", "", 1, 2147483647, 1, kPerRank,
            "Bound for building a group at its creation (settings agreement, TCP mesh); default: "
            "the group timeout."),
    // net/transport/tcp: links per peer (every rank must open as many) and how long a silent link
    // lives.
    // 16 links per peer is already far past what one host's cores can drive.
    integer("XCCL_NET_STREAMS", "2", 1, 16, 1, kGroupWide,
            "TCP connections (links) per peer; large messages are spread over them, and when one "
            "fails its traffic moves to the others."),
    // Above 10 ms (a busy progress thread must not look dead); below an hour.
    integer("XCCL_NET_LINK_TIMEOUT_MS", "1000", 10, 3600000, 1, kPerRank,
            "A TCP link that carries nothing (not even a heartbeat) for this long is taken down "
            "and its unacknowledged data replayed on the peer's other links."),
    // net/rendezvous/net_key.cc readKeyFile() checks the file (owner, mode, 32 B to 64 KiB).
    text("XCCL_NET_KEY_FILE",
         "A file holding the secret TCP links and ofi peers authenticate with (the same file on "
         "every rank; "
         "a regular file owned by the user, mode 600, 32 bytes to 64 KiB). Default: rank 0 draws "
         "a key for each group and shares it through the store."),
    // net/transport/tcp: what one peer's messages that came before their receive may hold here; at
    // least
    // a chunk, and a peer announcing more is failed before anything is allocated.
    integer("XCCL_NET_MAX_UNEXPECTED_BYTES", "17179869184", kMiB, kMaxBytes, 1, kPerRank,
            "Bytes of messages from one peer that arrived before their receive was posted which "
            "TCP keeps at a time; a message past it fails that peer with an error naming the "
            "sizes."),
    // The plan vocabulary's forceable algorithms (algo/tunables.cc parseAlgorithm() accepts
    // the same); ranks on different algorithms deadlock.
    choice("XCCL_ALGO", vocab::kAutoWord, forceableAlgorithms(), kGroupWide,
           "Force an algorithm for every collective that has it: direct or ring (TCP, even where "
           "shared memory is available), shm (shared memory where every rank is on one host), "
           "auto; unknown names are rejected at group creation."),
    // Below a page per step the uint32 chunk tags of a ring wrap for multi-GiB messages
    // (algo/ring.cc); above 1 GiB a chunk is a whole message and only costs buffer memory.
    integer("XCCL_RING_CHUNK_BYTES", "524288", 4 * kKiB, kGiB, 1, kGroupWide,
            "Pipelining chunk of the ring algorithms, in bytes (measured best on loopback TCP)."),
    integer("XCCL_SMALL_MSG_BYTES", "65536", 0, kMaxBytes, 1, kGroupWide,
            "Messages at or below this use the latency algorithms (direct exchange) instead of "
            "rings."),
    // Per rank by design: shm/segment.cc votes, and one rank's 1 turns shared memory off for all.
    boolean("XCCL_SHM_DISABLE", "0",
            "1 on any rank: the group's collectives use TCP even when every rank is on one host."),
    // shm::kMinSlotBytes: a slot is at least one page. The creating rank's value sizes the
    // segment and the others read it from its header, so ranks may differ.
    integer("XCCL_SHM_SLOT_BYTES", "", 4 * kKiB, kMaxBytes, 1, kPerRank,
            "Bytes of one shared-memory slot (each rank has two); default: 4 MiB, reduced to fit "
            "in half of /dev/shm's free space."),
    // The creating rank's value sizes every rank's pool (it publishes it), so ranks may differ.
    integer("XCCL_SHM_POOL_BYTES", "", 0, kMaxBytes, 1, kPerRank,
            "Bytes of each rank's pool of shared memory for tensors the backend allocates "
            "(allocateTensor, FSDP2's communication buffers); 0: no pool; default: 256 MiB, at "
            "most half of /dev/shm's free space shared among the ranks. Pages are reserved only "
            "as tensors use them."),
    text("XCCL_SHM_HOST_ID",
         "Which host this rank counts as when deciding which ranks share memory (for testing "
         "multi-host groups on one machine); default: hostname and boot id."),
    // 0 means "always two-shot"; the one/two-shot choice must match on every rank of a host.
    integer("XCCL_SHM_TWO_SHOT_BYTES", "", 0, kMaxBytes, 1, kGroupWide,
            "Shared-memory all_reduce/reduce messages from this many bytes on use two-shot "
            "instead of one-shot, at 4 ranks (scaled for other world sizes, docs/shm.md); 0: "
            "always two-shot; default: the measured 2 MiB."),
    // Per rank by design: net/regions/shm/cma.cc votes, and one rank's 0 turns the single copy off
    // for all.
    boolean("XCCL_SHM_CMA", "1",
            "0 on any rank: shared-memory collectives never read peers' memory with "
            "process_vm_readv (single copy) and always copy through the slots; no probe, no "
            "PR_SET_PTRACER (by default only the ranks' common parent is let in, docs/shm.md)."),
    // Part of each collective's signature: ranks that disagree fail with a mismatch error. The
    // defaults per collective are algo/tunables.h's kShmCma*MinBytes.
    thresholds("XCCL_SHM_CMA_MIN_BYTES", shmSingleCopyCollectives(), kMaxBytes, kGroupWide,
               "Shared-memory messages (the whole message) from this many bytes on are "
               "read from peers' memory with process_vm_readv (one copy) where the group "
               "allows it: one number or never for all four collectives, or per "
               "collective; default: all_reduce 1 MiB, all_gather 256 KiB, broadcast and "
               "reduce never (measured, docs/shm.md)."),
    text("XCCL_TOPO_FILE",
         "Load the machine topology from this JSON file (docs/topology.md) instead of probing "
         "sysfs, NVML and KFD; for VMs that hide the real topology and for planning offline."),
    text("XCCL_TOPO_DUMP_FILE",
         "Write the topology xccl found (or loaded) to this JSON file, for bug reports and for "
         "editing into an XCCL_TOPO_FILE."),
    // net/transport/ofi (docs/network.md, "libfabric (ofi)").
    text("XCCL_OFI_PROVIDER",
         "libfabric provider for the ofi engine, e.g. tcp;ofi_rxm (default: the first present of "
         "verbs;ofi_rxm, efa, tcp;ofi_rxm); an unknown one is an error listing those offered."),
    integer("XCCL_OFI_MR_CACHE_BYTES", "1073741824", 0, kMaxBytes, 1, kPerRank,
            "Bound of the ofi engine's memory registration cache in bytes (LRU eviction); 0 "
            "registers every operation's buffer afresh."),
    boolean("XCCL_OFI_TRACE", "0",
            "1: the ofi engine times every message (posts, completions, progress wake-ups, "
            "hand-offs to callers, context switches) and logs a summary when it closes."),
    // common/wait_slice.h: how long a waiting thread asks the scheduler to run at most.
    integer("XCCL_WAIT_SLICE_US", "100", 0, 100000, 1, kPerRank,
            "Scheduler slice in microseconds that xccl's threads, and a caller's thread while it "
            "sleeps in a collective, ask Linux (6.12+) for, so that a woken rank runs at once on "
            "a busy host; 0 leaves the scheduler alone. Below 100 reads as 100."),
    // net/regions/shm/spin_policy.h: whether a shared-memory wait may spin past its short spin.
    choice("XCCL_SHM_SPIN", "adaptive", {"adaptive", "short"}, kPerRank,
           "adaptive: a shared-memory wait spins on while the host has a core to spare or the "
           "ranks it waits for are running (with more ranks than CPUs it yields to them while "
           "no other task waits), for a budget that follows the measured wake-up cost "
           "(docs/shm.md, \"Waiting\"); short: it sleeps right after a short spin, whatever the "
           "host."),
    boolean("XCCL_PIN_PROGRESS", "1",
            "0: leave transport progress threads where the scheduler puts them instead of "
            "pinning them to the CPUs near the NIC (or GPU) they serve."),
    // The plan vocabulary's GpuForce rows, one entry per GpuForce in order (algo/tunables.cc
    // parseGpuForce() accepts the same).
    choice("XCCL_GPU_ALGO", vocab::kAutoWord, gpuForceChoices(), kGroupWide,
           "Force the GPU plan (docs/algorithms.md): auto, nccl (also rccl, vendor), kernel, "
           "one_shot, two_shot, all_pairs; applies to every GPU collective that can run it."),
    // all_reduce and broadcast step through messages in chunks of this size: below one element
    // a chunk holds nothing and the loop never ends (issue 9). At least a page; a multiple of
    // net/regions/cuda_ipc/layout.h's 256-byte part alignment, so every chunk starts 16-byte
    // aligned
    // for any element size (the kernels' vector width). 1 TiB: more than any GPU's memory.
    integer("XCCL_GPU_WORKSPACE_BYTES", "33554432", 4 * kKiB, kMaxBytes, 256, kGroupWide,
            "Bytes of each rank's GPU workspace (device memory peers read through CUDA IPC, "
            "allocated by a group's first GPU collective). all_reduce and broadcast run larger "
            "messages in chunks of this size; all_gather, reduce_scatter and all_to_all with a "
            "larger per-rank input go to NCCL/RCCL (or host memory when ranks share a GPU)."),
    // backend/gpu/gpu_work.h: what a kernel-route Work's wait() without a timeout does.
    boolean("XCCL_GPU_BLOCKING_WAIT", "0",
            "0: wait() on a kernel-route GPU Work makes the caller's stream wait, as NCCL's does, "
            "and the group's watchdog raises a failure by the next call, wait or the future; 1: "
            "it blocks until the call completed and raises if it failed (bounded by the group "
            "timeout), as TORCH_NCCL_BLOCKING_WAIT=1."),
    // Read by the Python package (python/xccl), declared here too so that one table names every
    // XCCL_* variable (tests/python/test_env_defaults_docs.py scans the Python for reads).
    boolean("XCCL_NO_ENV_DEFAULTS", "0",
            "1: the Python package sets none of its environment defaults (docs/environment.md)."),
    boolean("XCCL_NO_AUTOLOAD", "0",
            "1: import torch does not register xccl's name through torch's torch.backends entry "
            "point."),
    boolean("XCCL_DISABLE_ALIAS", "0",
            "1: xccl does not register the backend name \"xccl\" with torch."),
    // Read when building (setup.py) or by benchmarks/device_check.sh, never by the library;
    // declared so that one table names every XCCL_* variable (the same scan covers them).
    choice("XCCL_GPU", "auto", {"auto", "on", "off"}, kPerRank,
           "Build: the GPU parts; on makes a missing or mismatched GPU compiler an error."),
    text("XCCL_CUDA_ARCHS", "Build: CUDA architectures of the kernels, a CMake list."),
    text("XCCL_HIP_ARCHS", "Build: AMD targets of the HIP kernels, a CMake list."),
    text("XCCL_BUILD_DIR", "Build: the CMake build folder."),
    boolean("XCCL_TEST_HOOKS", "0",
            "Build: 1 builds the tests' fault injection (xccl._C._inject_wrong_result)."),
    text("XCCL_GTEST_SOURCE",
         "benchmarks/device_check.sh: a googletest source tree to build when none is installed."),
    integer("XCCL_CHECK_BUDGET_S", "420", 1, 86400, 1, kPerRank,
            "benchmarks/device_check.sh: seconds the whole GPU check may take."),
    text("XCCL_CHECK_STAGES_FILE",
         "benchmarks/device_check.sh: a bash file sourced after the stage functions."),
    choice("XCCL_CHECK_MPS", "1", {"0", "1"}, kPerRank,
           "benchmarks/device_check.sh: 1 starts an MPS daemon for ranks sharing a GPU when none "
           "runs; 0 leaves MPS alone."),
    // Every rank runs the vendor's collective beside each kernel call: one rank alone would
    // wait for peers that never join it.
    boolean("XCCL_GPU_VERIFY", "0", kGroupWide,
            "1: every kernel-route GPU collective is also run by NCCL/RCCL (host memory where "
            "ranks share a GPU) and the results compared; a mismatch raises an error naming the "
            "operation, dtype, size and rank. Debugging only: each call waits for both."),
    // Read by the Python package (python/xccl/verify.py).
    text("XCCL_CACHE_DIR",
         "Folder of xccl's per-user cache (the GPU kernel verification stamp); default "
         "$XDG_CACHE_HOME/xccl, else ~/.cache/xccl."),
    // Read by the Python package (python/xccl/tuning.py); the group follows rank 0's answer.
    boolean("XCCL_TUNING", "1",
            "0: groups plan by the built-in rules, ignoring any table of python -m xccl tune."),
    text("XCCL_TUNING_FILE",
         "The tuning table groups plan from (python -m xccl tune); default tuning.json in the "
         "cache folder (XCCL_CACHE_DIR)."),
};

std::mutex gMutex;
std::map<std::string, std::string> gCache;  // name -> raw effective value, fixed on first read

std::string lower(std::string value) {
  std::transform(value.begin(), value.end(), value.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return value;
}

// Decimal or 0x-hexadecimal with an optional '-'. Strict on purpose: no leading '+' or spaces,
// no trailing text, and no octal (stoll's base 0 would read "010" as 8).
std::optional<int64_t> parseInteger(const std::string& value) {
  const bool negative = !value.empty() && value[0] == '-';
  const char* begin = value.data() + (negative ? 1 : 0);
  const char* end = value.data() + value.size();
  int base = 10;
  if (end - begin > 2 && begin[0] == '0' && (begin[1] == 'x' || begin[1] == 'X')) {
    base = 16;
    begin += 2;
  }
  uint64_t magnitude = 0;
  const auto [stop, error] = std::from_chars(begin, end, magnitude, base);
  if (error != std::errc() || stop != end || begin == end) return std::nullopt;
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  if (magnitude > limit) return std::nullopt;
  return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
}

// "2^N" for the large powers of two the tables use, decimal otherwise.
std::string describeNumber(int64_t n) {
  if (n >= kMiB && (n & (n - 1)) == 0) {
    int exponent = 0;
    while ((int64_t{1} << exponent) != n) ++exponent;
    return "2^" + std::to_string(exponent);
  }
  return std::to_string(n);
}

// The spellings of one choice entry ("nccl|rccl|vendor"), canonical first.
std::vector<std::string> spellings(const std::string& entry) {
  std::vector<std::string> names;
  size_t start = 0;
  for (size_t bar; (bar = entry.find('|', start)) != std::string::npos; start = bar + 1) {
    names.push_back(entry.substr(start, bar - start));
  }
  names.push_back(entry.substr(start));
  return names;
}

// (canonical, declared spelling) of the choice `value` names, in any case; nullopt for none.
std::optional<std::pair<std::string, std::string>> matchChoice(const Variable& var,
                                                               const std::string& value) {
  const std::string wanted = lower(value);
  for (const std::string& entry : var.choices) {
    const std::vector<std::string> names = spellings(entry);
    auto it = std::find(names.begin(), names.end(), wanted);
    if (it != names.end()) return std::make_pair(names.front(), *it);
  }
  return std::nullopt;
}

using CollectiveBytes = std::vector<std::pair<vocab::Collective, uint64_t>>;

// One byte count of a kBytesPerCollective value: an integer in [min, max], or never (any case).
std::optional<uint64_t> parseBytesOrNever(const Variable& var, const std::string& text,
                                          const char** why) {
  if (lower(text) == "never") return kNever;
  const std::optional<int64_t> n = parseInteger(text);
  *why = !n             ? "not an integer or never"
         : *n < var.min ? "below the minimum"
         : *n > var.max ? "above the maximum"
                        : nullptr;
  if (*why != nullptr) return std::nullopt;
  return static_cast<uint64_t>(*n);
}

// What a kBytesPerCollective value sets, in the order of var.collectives; nullopt with *why for
// a bad value. Each collective may be named once, so a list has at most that many entries.
std::optional<CollectiveBytes> parseBytesPerCollective(const Variable& var,
                                                       const std::string& value, const char** why) {
  const size_t n = var.collectives.size();
  std::vector<std::optional<uint64_t>> set(n);
  if (value.find('=') == std::string::npos) {
    const std::optional<uint64_t> bytes = parseBytesOrNever(var, value, why);
    if (!bytes) return std::nullopt;
    std::fill(set.begin(), set.end(), bytes);
  } else {
    for (size_t start = 0;;) {
      const size_t comma = value.find(',', start);
      const std::string entry =
          value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      const size_t equals = entry.find('=');
      const std::string name = entry.substr(0, std::min(equals, entry.size()));
      vocab::Collective collective{};
      // Compared again after the lookup: a name with a NUL inside must not match its prefix.
      const bool known =
          vocab::lookup(name.c_str(), &collective) && name == vocab::name(collective);
      const auto at = std::find(var.collectives.begin(), var.collectives.end(), collective);
      if (equals == std::string::npos || !known || at == var.collectives.end()) {
        *why = "not a list of collective=bytes";
        return std::nullopt;
      }
      std::optional<uint64_t>& slot = set[at - var.collectives.begin()];
      if (slot) {
        *why = "a collective named twice";
        return std::nullopt;
      }
      slot = parseBytesOrNever(var, entry.substr(equals + 1), why);
      if (!slot) return std::nullopt;
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  CollectiveBytes result;
  for (size_t i = 0; i < n; ++i) {
    if (set[i]) result.emplace_back(var.collectives[i], *set[i]);
  }
  return result;
}

// The canonical spelling of a kBytesPerCollective value (checkValue in env.h).
std::string formatBytesPerCollective(const Variable& var, const CollectiveBytes& set) {
  auto word = [](uint64_t bytes) { return bytes == kNever ? "never" : std::to_string(bytes); };
  const bool alike = set.size() == var.collectives.size() &&
                     std::all_of(set.begin(), set.end(),
                                 [&](const auto& entry) { return entry.second == set[0].second; });
  if (alike) return word(set[0].second);
  std::string out;
  for (const auto& [collective, bytes] : set) {
    out += (out.empty() ? "" : ",") + std::string(vocab::name(collective)) + "=" + word(bytes);
  }
  return out;
}

// The canonical spelling of `value` (non-empty) for `var` (see checkValue in env.h), or nullopt
// with *why saying what is wrong with it.
std::optional<std::string> canonical(const Variable& var, const std::string& value,
                                     const char** why) {
  switch (var.kind) {
    case Kind::kText: return value;
    case Kind::kBoolean: {
      const std::string v = lower(value);
      if (v == "1" || v == "true" || v == "yes" || v == "on") return "1";
      if (v == "0" || v == "false" || v == "no" || v == "off") return "0";
      *why = "not a boolean";
      return std::nullopt;
    }
    case Kind::kInteger: {
      const std::optional<int64_t> n = parseInteger(value);
      *why = !n                         ? "not an integer"
             : *n < var.min             ? "below the minimum"
             : *n > var.max             ? "above the maximum"
             : *n % var.multipleOf != 0 ? "not a multiple"
                                        : nullptr;
      if (*why != nullptr) return std::nullopt;
      return std::to_string(*n);
    }
    case Kind::kChoice: {
      const std::optional<std::pair<std::string, std::string>> match = matchChoice(var, value);
      if (match) return match->first;
      *why = "unknown name";
      return std::nullopt;
    }
    case Kind::kBytesPerCollective: {
      const std::optional<CollectiveBytes> set = parseBytesPerCollective(var, value, why);
      if (!set) return std::nullopt;
      return formatBytesPerCollective(var, *set);
    }
  }
  *why = "undeclared kind";
  return std::nullopt;
}

// What checkValue throws and checkAll lists: names the variable, its value and what it accepts.
std::string problem(const Variable& var, const std::string& value, const char* why) {
  return detail::concat(var.name, "='", value, "' is invalid (", why, "): ", var.name, " accepts ",
                        describeAccepted(var));
}

// The raw effective value of `var`, read from the environment once per process.
std::string rawValue(const Variable& var) {
  std::lock_guard<std::mutex> guard(gMutex);
  auto it = gCache.find(var.name);
  if (it != gCache.end()) return it->second;
  const char* raw = std::getenv(var.name);
  std::string value = (raw != nullptr && raw[0] != '\0') ? raw : var.defaultValue;
  gCache.emplace(var.name, value);
  return value;
}

}  // namespace

const std::vector<Variable>& all() { return kVariables; }

const Variable& find(const char* name) {
  auto it = std::find_if(kVariables.begin(), kVariables.end(),
                         [&](const Variable& v) { return std::string(v.name) == name; });
  XCCL_CHECK(it != kVariables.end(), "environment variable ", name, " is not declared in env.cc");
  return *it;
}

std::string describeAccepted(const Variable& var) {
  switch (var.kind) {
    case Kind::kText: return "any text";
    case Kind::kBoolean: return "boolean 1/0, true/false, yes/no, on/off";
    case Kind::kInteger: {
      std::string out = "integer " + describeNumber(var.min) + " to " + describeNumber(var.max);
      if (var.multipleOf > 1) out += ", multiple of " + std::to_string(var.multipleOf);
      return out;
    }
    case Kind::kChoice: {
      std::string out = "one of ";
      for (size_t i = 0; i < var.choices.size(); ++i) {
        const std::vector<std::string> names = spellings(var.choices[i]);
        out += (i == 0 ? "" : ", ") + names[0];
        for (size_t j = 1; j < names.size(); ++j) {
          out += (j == 1 ? " (or " : ", ") + names[j] + (j + 1 == names.size() ? ")" : "");
        }
      }
      return out;
    }
    case Kind::kBytesPerCollective: {
      std::string names;
      for (size_t i = 0; i < var.collectives.size(); ++i) {
        names += (i == 0 ? "" : ", ") + std::string(vocab::name(var.collectives[i]));
      }
      return "integer " + describeNumber(var.min) + " to " + describeNumber(var.max) +
             " or never, alike for " + names +
             ", or per collective as a comma-separated list of name=integer or name=never";
    }
  }
  return "?";
}

std::string checkValue(const Variable& var, const std::string& value) {
  const char* why = nullptr;
  std::optional<std::string> result = canonical(var, value, &why);
  if (!result) XCCL_THROW(ErrorKind::kInvalidArgument, problem(var, value, why));
  return *result;
}

std::string getString(const char* name) {
  const Variable& var = find(name);
  std::string value = rawValue(var);
  if (value.empty()) return value;
  (void)checkValue(var, value);
  // Choices read back as declared ("INFO" as "info"): the readers compare exact spellings.
  return var.kind == Kind::kChoice ? matchChoice(var, value)->second : value;
}

int64_t getInt(const char* name) {
  const Variable& var = find(name);
  XCCL_CHECK(var.kind == Kind::kInteger, name, " is not an integer variable");
  const std::string value = rawValue(var);
  XCCL_CHECK_ARG(!value.empty(), name, " is not set and has no default");
  return std::stoll(checkValue(var, value));  // canonical decimal: cannot fail
}

bool getBool(const char* name) {
  const Variable& var = find(name);
  XCCL_CHECK(var.kind == Kind::kBoolean, name, " is not a boolean variable");
  const std::string value = rawValue(var);
  return !value.empty() && checkValue(var, value) == "1";
}

std::vector<std::pair<vocab::Collective, uint64_t>> getBytesPerCollective(const char* name) {
  const Variable& var = find(name);
  XCCL_CHECK(var.kind == Kind::kBytesPerCollective, name,
             " is not a bytes-per-collective variable");
  const std::string value = rawValue(var);
  if (value.empty()) return {};
  return bytesPerCollective(var, value);
}

std::vector<std::pair<vocab::Collective, uint64_t>> bytesPerCollective(const Variable& var,
                                                                       const std::string& value) {
  const char* why = nullptr;
  const std::optional<CollectiveBytes> set = parseBytesPerCollective(var, value, &why);
  if (!set) XCCL_THROW(ErrorKind::kInvalidArgument, problem(var, value, why));
  return *set;
}

void checkAll() {
  std::string problems;
  for (const Variable& var : kVariables) {
    const std::string value = rawValue(var);
    const char* why = nullptr;
    if (value.empty() || canonical(var, value, &why)) continue;
    problems += (problems.empty() ? "" : "; ") + problem(var, value, why);
  }
  XCCL_CHECK_ARG(problems.empty(), problems);
}

std::vector<std::pair<std::string, std::string>> groupWideSettings() {
  std::vector<std::pair<std::string, std::string>> settings;
  for (const Variable& var : kVariables) {
    if (!var.groupWide) continue;
    const std::string value = getString(var.name);
    settings.emplace_back(var.name, value.empty() ? value : checkValue(var, value));
  }
  return settings;
}

}  // namespace xccl::env
