// xccl's flight recorder: the last N collectives and point-to-point operations of every
// ProcessGroupXccl in this process, in a ring buffer, dumped in the format of torch's own flight
// recorder (torch/csrc/distributed/c10d/FlightRecorder.hpp: a pickled dict with "version",
// "comm_lib_version", "pg_config", "pg_status" and "entries"), so that torch's analyzer
// (`torchfrtrace DIR -p PREFIX`, torch/distributed/flight_recorder) reads every rank's dump.
//
// Why not torch's FlightRecorder<EventType> template: its record() captures a Python traceback
// per call (it takes the GIL, about 1 us), too much next to shared-memory collectives of a few
// microseconds, and it lives in internal headers that may change between torch versions, while
// the dump format is versioned by its "version" field. So no stack frames are recorded: entries
// have no "frames" key (the analyzer reads that as no frames).
//
// Size: TORCH_FR_BUFFER_SIZE, else TORCH_NCCL_TRACE_BUFFER_SIZE, else torch's default of 2000
// entries, read once; 0 turns recording and every dump off. Dumps go to <prefix><global rank>,
// the prefix being TORCH_FR_DUMP_TEMP_FILE, else TORCH_NCCL_DEBUG_INFO_TEMP_FILE, else the user's
// own cache folder (${XDG_CACHE_HOME:-$HOME/.cache}/torch/comm_lib_trace_rank_, made 0700; the
// home from the password database when HOME is unset, never the shared /tmp/.cache that torch
// falls back to) when it is this user's alone, else a private folder made once per process with
// mkdtemp, with one warning saying why. A dump is written to a temporary file of mode 0600 and
// renamed, so a reader never sees half of one and a link planted at its name is replaced, never
// followed; a dump that cannot be written is one warning per process and nothing else (training
// goes on).
//
// Threads: every method may be called from any thread. One mutex guards the buffer and is held
// only to copy a few fields (never for pickling or I/O); nothing here takes the GIL.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace xccl::backend {

class FlightRecorder {
 public:
  // What record() returns when recording is off; every method accepts it and does nothing.
  static constexpr uint64_t kNoRecord = UINT64_MAX;
  // Peers ask for a dump with every status query after one of their timeouts: one timeout of a
  // group brings a query from each peer within the spread of their timeouts (seconds), and a
  // hostile or looping peer could ask without end. One dump per 10 s keeps the first, which
  // shows the hang, and bounds the disk and CPU spent; a later hang is a group timeout apart
  // (minutes by default), so its dump is still written.
  static constexpr std::chrono::seconds kRequestInterval{10};

  // The process-wide recorder. Never destroyed: a dump may run while the process exits.
  static FlightRecorder& get();

  bool enabled() const { return capacity_ > 0; }
  size_t capacity() const { return capacity_; }

  // A new group's id (the dump's "pg_id"), unique in this process.
  size_t newGroupId();
  // Names group `id` for the dump's "pg_config" and its entries' "process_group" (name, desc);
  // `ranks` are its members' global ranks. The first group described sets this process's
  // global rank (`globalRank`), which names its dump file.
  void describeGroup(size_t id, const std::string& name, const std::string& desc,
                     std::vector<uint64_t> ranks, int globalRank);

  // One operation as torch's recorder sees it. `name` is torch's (types.py COLLECTIVES/P2P of
  // torch/distributed/flight_recorder, e.g. "all_reduce"), with static storage.
  struct Call {
    size_t groupId = 0;
    uint64_t collectiveSeq = 0;  // the group's collective sequence number
    uint64_t p2pSeq = 0;         // its point-to-point sequence number
    const char* name = "";
    bool isP2P = false;
    int src = -1, dst = -1;  // group ranks of a send or recv ("send 0->1", "recv 1<-0")
    std::chrono::milliseconds timeout{0};
  };
  // Records `call` as scheduled (in the caller's thread) and returns its record id.
  uint64_t record(const Call& call, const std::vector<at::Tensor>& inputs,
                  const std::vector<at::Tensor>& outputs);
  // The operation began to run / ended (`completed` false: it failed or timed out). Either is a
  // no-op for an entry the ring has overwritten since.
  void started(uint64_t id);
  void finished(uint64_t id, bool completed);

  // The pickled dump (torch's format); `onlyActive` leaves out completed entries.
  std::string dump(bool onlyActive);
  // Writes dump(onlyActive) to `prefix` (defaultPrefix() if empty) + this process's global
  // rank. Returns the path, or "" when it could not (logged once per process) or when the
  // recorder is off or no group named the rank yet.
  std::string write(const std::string& prefix, bool onlyActive);
  // Where dumps go without an explicit prefix (see the top of this file).
  static std::string defaultPrefix();

  // Has write() run soon on the recorder's own thread; returns at once. For the transport's
  // progress thread, which must not block (a peer's timeout asks this rank to dump). At most
  // one request per kRequestInterval is taken (true); the others are dropped (false).
  bool requestWrite();
  // Waits up to `bound` for requested writes to finish (before the process may exit).
  void awaitWrites(std::chrono::milliseconds bound);

 private:
  struct Entry {
    uint64_t id = kNoRecord;
    Call call;
    uint64_t opId = 0;
    int64_t createdNs = 0;
    std::optional<int64_t> startedNs, completedNs;
    bool retired = false;
    // Sizes of every input then every output, flattened; dims_[i] is tensor i's rank.
    std::vector<int64_t> sizes;
    std::vector<uint8_t> inputDims, outputDims;
    std::vector<c10::ScalarType> inputTypes, outputTypes;
    std::thread::id threadId;
    std::string threadName;
  };
  struct Group {
    std::string name, desc;
    std::vector<uint64_t> ranks;
    uint64_t ops = 0;  // operations recorded (the next one's op_id)
    // Collective sequence numbers, -1 for none yet (torch's ProcessGroupStatus).
    int64_t lastEnqueued = -1, lastStarted = -1, lastCompleted = -1;
  };

  FlightRecorder();
  // The slot holding record `id`, or null once the ring overwrote it (caller holds mutex_).
  Entry* slotLocked(uint64_t id);
  void writerLoop();

  const size_t capacity_;
  std::mutex mutex_;
  std::vector<Entry> entries_;  // grows to capacity_, then record id % capacity_ is the slot
  uint64_t nextId_ = 0;
  std::map<size_t, Group> groups_;
  size_t nextGroupId_ = 0;
  int globalRank_ = -1;

  std::mutex writeMutex_;  // one write at a time (they share the file names)
  bool warned_ = false;    // guarded by writeMutex_

  std::mutex requestMutex_;  // the writer thread's state
  std::condition_variable requestChanged_;
  int writerPid_ = -1;  // the process that started the writer thread
  int pendingWrites_ = 0;  // requested and not yet written (coalesced into one write)
  std::optional<std::chrono::steady_clock::time_point> lastRequested_;  // the last request taken
};

}  // namespace xccl::backend
