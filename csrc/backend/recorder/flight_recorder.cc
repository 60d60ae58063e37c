// The flight recorder's ring buffer and its writer thread (flight_recorder.h). The dump itself
// is flight_recorder_dump.cc.
#include "backend/recorder/flight_recorder.h"

#include <c10/util/ApproximateClock.h>
#include <c10/util/thread_name.h>

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace xccl::backend {
namespace {

// torch's own reading of the size (FlightRecorder.hpp): the first of the two variables that is
// set; a value that is not a number counts as unset there too.
size_t bufferSizeFromEnvironment() {
  for (const char* name : {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    long long parsed = std::strtoll(value, &end, 10);
    if (end != value && *end == '\0') return parsed > 0 ? static_cast<size_t>(parsed) : 0;
  }
  return 2000;
}

// The calling thread's name, read once per thread: the name costs a system call, and record()
// runs on every collective. A thread renamed later keeps its first name here.
const std::string& threadName() {
  thread_local const std::string name = c10::getThreadName();
  return name;
}

void appendTensors(const std::vector<at::Tensor>& tensors, std::vector<int64_t>& sizes,
                   std::vector<uint8_t>& dims, std::vector<c10::ScalarType>& types) {
  for (const auto& t : tensors) {
    auto shape = t.sizes();
    sizes.insert(sizes.end(), shape.begin(), shape.end());
    dims.push_back(static_cast<uint8_t>(shape.size()));
    types.push_back(t.scalar_type());
  }
}

}  // namespace

FlightRecorder& FlightRecorder::get() {
  static FlightRecorder* recorder = new FlightRecorder();  // leaked on purpose (see the header)
  return *recorder;
}

FlightRecorder::FlightRecorder() : capacity_(bufferSizeFromEnvironment()) {}

size_t FlightRecorder::newGroupId() {
  std::lock_guard<std::mutex> guard(mutex_);
  return nextGroupId_++;
}

void FlightRecorder::describeGroup(size_t id, const std::string& name, const std::string& desc,
                                   std::vector<uint64_t> ranks, int globalRank) {
  std::lock_guard<std::mutex> guard(mutex_);
  Group& group = groups_[id];
  group.name = name;
  group.desc = desc;
  group.ranks = std::move(ranks);
  if (globalRank_ < 0) globalRank_ = globalRank;
}

uint64_t FlightRecorder::record(const Call& call, const std::vector<at::Tensor>& inputs,
                                const std::vector<at::Tensor>& outputs) {
  if (!enabled()) return kNoRecord;
  const int64_t now = c10::getTime();
  const std::thread::id thread = std::this_thread::get_id();
  const std::string& name = threadName();
  std::lock_guard<std::mutex> guard(mutex_);
  const uint64_t id = nextId_++;
  if (entries_.size() < capacity_) entries_.emplace_back();
  // A reused slot keeps its vectors' storage: no allocation once the ring has wrapped.
  Entry& e = entries_[id % capacity_];
  e.id = id;
  e.call = call;
  Group& group = groups_[call.groupId];
  e.opId = group.ops++;
  if (!call.isP2P) group.lastEnqueued = static_cast<int64_t>(call.collectiveSeq);
  e.createdNs = now;
  e.startedNs.reset();
  e.completedNs.reset();
  e.retired = false;
  e.sizes.clear();
  e.inputDims.clear();
  e.outputDims.clear();
  e.inputTypes.clear();
  e.outputTypes.clear();
  appendTensors(inputs, e.sizes, e.inputDims, e.inputTypes);
  appendTensors(outputs, e.sizes, e.outputDims, e.outputTypes);
  e.threadId = thread;
  e.threadName = name;
  return id;
}

FlightRecorder::Entry* FlightRecorder::slotLocked(uint64_t id) {
  if (id == kNoRecord || entries_.empty()) return nullptr;
  Entry& e = entries_[id % capacity_];
  return e.id == id ? &e : nullptr;
}

void FlightRecorder::started(uint64_t id) {
  if (id == kNoRecord) return;
  const int64_t now = c10::getTime();
  std::lock_guard<std::mutex> guard(mutex_);
  Entry* e = slotLocked(id);
  if (e == nullptr || e->startedNs) return;
  e->startedNs = now;
  if (!e->call.isP2P) {
    groups_[e->call.groupId].lastStarted = static_cast<int64_t>(e->call.collectiveSeq);
  }
}

void FlightRecorder::finished(uint64_t id, bool completed) {
  if (id == kNoRecord) return;
  const int64_t now = c10::getTime();
  std::lock_guard<std::mutex> guard(mutex_);
  Entry* e = slotLocked(id);
  if (e == nullptr) return;
  // Retired either way; only a success is "completed" (torch: a retired entry that never
  // completed timed out or failed).
  e->retired = true;
  if (!completed) return;
  if (!e->startedNs) e->startedNs = now;
  e->completedNs = now;
  if (!e->call.isP2P) {
    groups_[e->call.groupId].lastCompleted = static_cast<int64_t>(e->call.collectiveSeq);
  }
}

bool FlightRecorder::requestWrite() {
  if (!enabled()) return false;
  {
    std::lock_guard<std::mutex> guard(requestMutex_);
    const auto now = std::chrono::steady_clock::now();
    if (lastRequested_ && now - *lastRequested_ < kRequestInterval) return false;
    lastRequested_ = now;
    ++pendingWrites_;
    // A forked child has no writer thread even if its parent started one.
    if (writerPid_ != ::getpid()) {
      writerPid_ = ::getpid();
      std::thread([this] { writerLoop(); }).detach();  // lives as long as the process
    }
  }
  requestChanged_.notify_all();
  return true;
}

void FlightRecorder::awaitWrites(std::chrono::milliseconds bound) {
  std::unique_lock<std::mutex> lock(requestMutex_);
  requestChanged_.wait_for(lock, bound, [&] { return pendingWrites_ == 0; });
}

void FlightRecorder::writerLoop() {
  std::unique_lock<std::mutex> lock(requestMutex_);
  for (;;) {
    requestChanged_.wait(lock, [&] { return pendingWrites_ > 0; });
    // Requests that arrive while writing are served by the next write, which sees them.
    const int serving = pendingWrites_;
    lock.unlock();
    write("", /*onlyActive=*/false);
    lock.lock();
    pendingWrites_ -= serving;
    requestChanged_.notify_all();
  }
}

}  // namespace xccl::backend
