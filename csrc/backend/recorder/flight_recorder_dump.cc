// The flight recorder's dump (flight_recorder.h): torch's pickled format, and its file.
//
// Keys, their order and their types are those of torch's FlightRecorder::dump() with
// includeStackTraces false (torch/csrc/distributed/c10d/FlightRecorderDetail.hpp), which
// torch/distributed/flight_recorder/components/{loader,builder,types}.py read.
#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "backend/recorder/flight_recorder.h"
#include "common/files.h"
#include "common/logging.h"

namespace xccl::backend {
namespace {

// The format version torch's recorder writes with these fields (FlightRecorder.hpp version_val);
// the analyzer checks that all ranks agree and picks its matching rules by it.
constexpr const char* kFormatVersion = "2.10";
constexpr const char* kLibrary = "xccl";

using Dict = c10::Dict<c10::IValue, c10::IValue>;
using List = c10::List<c10::IValue>;

Dict newDict() { return Dict(c10::AnyType::get(), c10::AnyType::get()); }
List newList() { return List(c10::AnyType::get()); }

// Plain pickle, loadable by Python's pickle without torch: no type tags on containers.
std::string pickled(const c10::IValue& value) {
  std::string out;
  torch::jit::Pickler pickler([&](const char* data, size_t size) { out.append(data, size); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  return out;
}

std::string ranksText(const std::vector<uint64_t>& ranks) {
  std::string text = "[";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text + "]";
}

// "xccl:all_reduce", "xccl:send 0->1", "xccl:recv 1<-0" (the names torch's analyzer parses).
std::string profilingName(const FlightRecorder::Call& call) {
  std::string name = std::string(kLibrary) + ":" + call.name;
  if (std::strcmp(call.name, "send") == 0) {
    name += " " + std::to_string(call.src) + "->" + std::to_string(call.dst);
  } else if (std::strcmp(call.name, "recv") == 0) {
    name += " " + std::to_string(call.dst) + "<-" + std::to_string(call.src);
  }
  return name;
}

// One list of sizes per tensor, read from the flattened `sizes` at `*at`.
List sizeLists(const std::vector<int64_t>& sizes, size_t* at, const std::vector<uint8_t>& dims) {
  List out = newList();
  for (uint8_t d : dims) {
    List shape = newList();
    for (uint8_t i = 0; i < d; ++i) shape.push_back(sizes[(*at)++]);
    out.push_back(shape);
  }
  return out;
}

List typeNames(const std::vector<c10::ScalarType>& types) {
  List out = newList();
  for (auto t : types) out.push_back(std::string(c10::toString(t)));
  return out;
}

bool makeDirectories(const std::string& path) {
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    if (::mkdir(path.substr(0, slash).c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return ::mkdir(path.c_str(), 0700) == 0 || errno == EEXIST;
}

// Writes `data` to `path` through a temporary file renamed over it; false with `*why` set.
// The temporary file gets a fresh random name in the target's folder, created exclusively at
// mode 0600 (mkostemp): a name an attacker could predict, and plant a symlink at, is never
// opened, and the dump (which names the job's ranks and calls) is readable by its owner only.
bool writeFile(const std::string& path, const std::string& data, std::string* why) {
  std::string temporary = path + ".tmpXXXXXX";
  const int fd = ::mkostemp(temporary.data(), O_CLOEXEC);
  if (fd < 0) {
    *why = std::strerror(errno);
    return false;
  }
  bool ok = true;
  for (size_t done = 0; ok && done < data.size();) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      ok = false;
    }
  }
  int err = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && std::rename(temporary.c_str(), path.c_str()) == 0) return true;
  *why = std::strerror(ok ? errno : err);
  ::unlink(temporary.c_str());
  return false;
}

}  // namespace

std::string FlightRecorder::defaultPrefix() {
  for (const char* name : {"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return value;
  }
  // torch's DebugInfoWriter writes to $HOME/.cache/torch, or /tmp/.cache/torch without a HOME:
  // a folder in the shared temporary folder that another user can make first (and read every
  // dump, or plant links in it). xccl's default is the user's own cache folder
  // (XDG_CACHE_HOME, else the home folder's .cache, the password database's home when HOME is
  // unset), checked after it is made (files::folderProblem); when there is none, or it is not
  // this user's alone, a private folder made once per process, with one warning saying why.
  const char* cache = std::getenv("XDG_CACHE_HOME");
  std::string root;
  if (cache != nullptr && cache[0] == '/') {
    root = cache;
  } else if (const std::string home = files::homeFolder(); !home.empty()) {
    root = home + "/.cache";
  }
  std::string why = "cannot be chosen: no home folder (HOME unset, none in the password database)";
  const std::string folder = root.empty() ? "" : root + "/torch";
  if (!folder.empty()) {
    makeDirectories(folder);  // a failure shows when the file cannot be written
    why = files::folderProblem(folder);
    if (why.empty()) return folder + "/comm_lib_trace_rank_";
  }
  static std::mutex mutex;
  static bool tried = false;
  static std::string privateFolder;
  std::lock_guard<std::mutex> guard(mutex);
  if (!tried) {
    tried = true;
    std::string failed;
    privateFolder = files::makePrivateFolder("xccl-flight-recorder-", &failed);
    const std::string named = folder.empty() ? "" : folder + " ";
    if (privateFolder.empty()) {
      XCCL_WARN("recorder", "the flight recorder's default folder ", named, why, ", and ", failed,
                ": no dump is written (set TORCH_FR_DUMP_TEMP_FILE to a path prefix of yours)");
    } else {
      XCCL_WARN("recorder", "the flight recorder's default folder ", named, why,
                ": dumps go to the private folder ", privateFolder,
                " instead (set TORCH_FR_DUMP_TEMP_FILE to choose where)");
    }
  }
  return privateFolder.empty() ? "" : privateFolder + "/comm_lib_trace_rank_";
}

std::string FlightRecorder::dump(bool onlyActive) {
  // Copy under the lock, build the IValues without it: record() must never wait for a dump.
  std::vector<Entry> entries;
  std::map<size_t, Group> groups;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    // Full ring: the oldest entry is the one the next record overwrites.
    const size_t oldest = entries_.empty() || entries_.size() < capacity_ ? 0 : nextId_ % capacity_;
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[(oldest + i) % entries_.size()];
      if (!(onlyActive && e.completedNs)) entries.push_back(e);
    }
    groups = groups_;
  }
  Dict config = newDict(), status = newDict();
  for (const auto& [id, g] : groups) {
    Dict info = newDict();
    info.insert("name", g.name);
    info.insert("desc", g.desc);
    info.insert("ranks", ranksText(g.ranks));
    config.insert(g.name, info);
    Dict state = newDict();
    state.insert("last_enqueued_collective", g.lastEnqueued);
    state.insert("last_started_collective", g.lastStarted);
    state.insert("last_completed_collective", g.lastCompleted);
    status.insert(std::to_string(id), state);
  }
  List list = newList();
  for (const Entry& e : entries) {
    const Group& g = groups[e.call.groupId];
    Dict d = newDict();
    d.insert("record_id", static_cast<int64_t>(e.id));
    d.insert("pg_id", static_cast<int64_t>(e.call.groupId));
    d.insert("process_group", c10::ivalue::Tuple::create(g.name, g.desc));
    d.insert("thread_name", e.threadName);
    std::ostringstream thread;
    thread << e.threadId;
    d.insert("thread_id", thread.str());
    d.insert("collective_seq_id", static_cast<int64_t>(e.call.collectiveSeq));
    d.insert("p2p_seq_id", static_cast<int64_t>(e.call.p2pSeq));
    d.insert("op_id", static_cast<int64_t>(e.opId));
    d.insert("profiling_name", profilingName(e.call));
    d.insert("time_created_ns", e.createdNs);
    if (e.completedNs) d.insert("duration_ms", (*e.completedNs - *e.startedNs) / 1e6);
    size_t at = 0;
    d.insert("input_sizes", sizeLists(e.sizes, &at, e.inputDims));
    d.insert("input_dtypes", typeNames(e.inputTypes));
    d.insert("output_sizes", sizeLists(e.sizes, &at, e.outputDims));
    d.insert("output_dtypes", typeNames(e.outputTypes));
    d.insert("state", e.completedNs ? "completed" : (e.startedNs ? "started" : "scheduled"));
    d.insert("time_discovered_started_ns", e.startedNs ? c10::IValue(*e.startedNs) : c10::IValue());
    d.insert("time_discovered_completed_ns",
             e.completedNs ? c10::IValue(*e.completedNs) : c10::IValue());
    d.insert("retired", e.retired);
    d.insert("timeout_ms", static_cast<int64_t>(e.call.timeout.count()));
    d.insert("is_p2p", e.call.isP2P);
    list.push_back(d);
  }
  Dict result = newDict();
  result.insert("version", kFormatVersion);
  result.insert("pg_config", config);
  result.insert("comm_lib_version", std::string(kLibrary));
  result.insert("pg_status", status);
  result.insert("entries", list);
  return pickled(result);
}

std::string FlightRecorder::write(const std::string& prefix, bool onlyActive) {
  if (!enabled()) return "";
  int rank;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    rank = globalRank_;
  }
  if (rank < 0) return "";  // no group yet: nothing recorded, no rank to name the file
  std::string data = dump(onlyActive);
  std::lock_guard<std::mutex> guard(writeMutex_);
  const std::string chosen = prefix.empty() ? defaultPrefix() : prefix;
  if (chosen.empty()) return "";  // no folder for the default: defaultPrefix() warned
  const std::string path = chosen + std::to_string(rank);
  std::string why;
  if (writeFile(path, data, &why)) {
    XCCL_INFO("recorder", "flight recorder dump written to ", path);
    return path;
  }
  if (!warned_) {
    warned_ = true;
    XCCL_WARN("recorder", "could not write the flight recorder dump to ", path, ": ", why,
              " (set TORCH_FR_DUMP_TEMP_FILE to a writable path prefix; this warning is not "
              "repeated)");
  }
  return "";
}

}  // namespace xccl::backend
