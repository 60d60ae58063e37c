#include "backend/core/group_core.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "algo/context.h"
#include "backend/core/gil.h"
#include "backend/core/machine.h"
#include "backend/core/torch_error.h"
#include "backend/recorder/flight_recorder.h"
#include "common/env.h"
#include "common/logging.h"
#include "net/address.h"
#include "net/agree.h"
#include "net/factory.h"
#include "topo/affinity.h"

namespace xccl::backend {
namespace {

// The CPUs near the NIC that carries this rank's TCP traffic (`listen`, the address the transport
// listens on; topo/affinity.h); empty leaves the progress thread unpinned. The machine is
// discovered once per process. Pinning is an optimisation: a failure here (e.g. a malformed
// XCCL_TOPO_FILE) is logged, never fatal.
std::vector<int> progressCpus(const net::Address& listen) {
  try {
    // No discovery (NVML, sysfs walks) at group creation when its only use is switched off.
    if (!env::getBool("XCCL_PIN_PROGRESS")) return {};
    return topo::progressCpusFor(thisMachine(), /*gpu=*/-1, listen.toString());
  } catch (const std::exception& e) {
    XCCL_WARN("backend", "progress thread left unpinned: ", e.what());
    return {};
  }
}

// XCCL_NET_IFNAMES split at commas, once the NIC selection declares it; until then every
// usable interface (empty).
std::vector<std::string> netIfnames() {
  std::vector<std::string> names;
  const std::string text = env::getString("XCCL_NET_IFNAMES");
  for (size_t start = 0; start < text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) names.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return names;
}

}  // namespace

GroupCore::GroupCore(const c10d::Backend& face, c10::intrusive_ptr<c10d::Backend::Options> options,
                     c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                     std::shared_ptr<const GroupPolicy> policy)
    : face_(face),
      options_(std::move(options)),
      policy_(policy ? std::move(policy) : std::make_shared<const GroupPolicy>()),
      store_(std::move(store)),
      rank_(rank),
      size_(size),
      recorderGroupId_(FlightRecorder::get().newGroupId()) {}

void GroupCore::connect(net::Store& store, std::chrono::milliseconds timeout,
                        const ConnectOptions& opts) {
  executor_ = std::make_unique<Executor>();
  if (size_ > 1) {
    // What decides routes and algorithms must be equal on every rank, or ranks would take
    // different paths through one collective and deadlock: every rank fails alike instead,
    // naming the setting and which ranks have which value.
    net::Settings settings = env::groupWideSettings();
    settings.emplace_back("ProcessGroupXccl.Options.algorithm", opts.algorithm);
    net::agreeOnSettings(store, "settings", rank_, size_, settings, timeout);
  }
  // Per peer: shared memory on this host, XCCL_NET's engine to other hosts (net/factory.h).
  net::NetOptions net;
  net.storeHost = opts.storeHost;
  net.timeout = timeout;
  // The interface TCP listens on (it makes the same choice from storeHost), to pin near its NIC.
  net.progressCpus = progressCpus(net::chooseListenAddress(opts.storeHost));
  net.ifnames = netIfnames();
  transport_ = net::createTransport(store, rank_, size_, net);
  setUpSharedMemory(store, opts.lendsPool);
  setUpTuning(store, timeout);
  transport_->setStatusProvider([this] {
    // Peers ask only after a timeout: this rank's flight recorder dump joins theirs. Off this
    // (progress) thread, which must answer at once.
    FlightRecorder::get().requestWrite();
    return statusText();
  });
}

void GroupCore::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> guard(stateMutex_);
  options_->timeout = timeout;
}

std::chrono::milliseconds GroupCore::effectiveTimeout(std::chrono::milliseconds requested) const {
  if (requested != c10d::kUnsetTimeout) return requested;
  std::lock_guard<std::mutex> guard(stateMutex_);
  return options_->timeout;
}

void GroupCore::checkUsable(const char* opName) const {
  std::lock_guard<std::mutex> guard(stateMutex_);
  TORCH_CHECK(!shutDown_, "xccl ", opName, ": the process group was shut down");
  if (!brokenReason_.empty()) {
    throwTorchError(ErrorKind::kAborted, std::string("xccl ") + opName +
                                             ": the process group is unusable after an earlier "
                                             "failure: " +
                                             brokenReason_);
  }
  TORCH_CHECK(transport_, "xccl ", opName,
              ": this group was created with enable_reconfigure=True and has no members yet; "
              "call torch.distributed._reconfigure first");
}

void GroupCore::markBroken(const std::string& reason) {
  {
    std::lock_guard<std::mutex> guard(stateMutex_);
    if (!brokenReason_.empty()) return;
    brokenReason_ = reason;
    broken_.store(true);
  }
  XCCL_WARN("backend", reason);
  beforeAbort();
  if (transport_) transport_->abort(reason);
}

bool GroupCore::markShutDown() {
  std::lock_guard<std::mutex> guard(stateMutex_);
  if (shutDown_) return false;
  shutDown_ = true;
  return true;
}

bool GroupCore::isShutDown() const {
  std::lock_guard<std::mutex> guard(stateMutex_);
  return shutDown_;
}

GroupCore::WorkPtr GroupCore::enqueue(c10d::OpType type, const char* opName,
                                      std::vector<at::Tensor> outputs,
                                      std::optional<std::vector<at::Tensor>> inputs,
                                      std::chrono::milliseconds timeout, bool asyncOp, Body body,
                                      uint64_t seqCount) {
  checkUsable(opName);
  const uint64_t seq = seq_.fetch_add(seqCount) + 1;
  const uint64_t record =
      recordCollective(type, seq, seqCount, inputs ? *inputs : outputs, outputs, timeout);
  auto work = c10::make_intrusive<XcclWork>(rank_, type, opName, seq, std::move(outputs), timeout);
  std::string what = std::string(opName) + " #" + std::to_string(seq);
  auto task = [this, work, what, timeout, type, opName, seqCount, record,
               body = std::move(body)]() {
    const uint64_t seq = work->getSequencenumber();
    enteredOp_.store(opName);
    entered_.store(seq);
    FlightRecorder::get().started(record);
    const auto began = std::chrono::steady_clock::now();
    try {
      {
        std::lock_guard<std::mutex> guard(stateMutex_);
        if (!brokenReason_.empty()) {
          throw Error(ErrorKind::kAborted, "the process group is unusable after an earlier "
                                           "failure: " +
                                               brokenReason_);
        }
      }
      algo::Context ctx{*transport_, seq, what, net::Clock::now() + timeout, tunables_};
      body(algo::Runner{ctx, segment_.get(), alive_, hierarchy_.get(), tuning_.table.get()});
    } catch (const std::exception& e) {
      std::string message = std::string("rank ") + std::to_string(rank_) + ": " + e.what();
      if (message.find(what) == std::string::npos) {
        message = what + " failed on " + message;
      }
      const ErrorKind kind = errorKindOf(e);
      if (kind == ErrorKind::kTimeout) {
        auto ranFor = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - began);
        message = torchTimeoutWording(type, seq, ranFor, timeout) + message +
                  diagnoseTimeout(seq, timeout);
      }
      completed_.store(seq + seqCount - 1);
      FlightRecorder::get().finished(record, /*completed=*/false);
      // Peers may be inside this collective: the group fails whatever the kind (a bad argument
      // found only here still raises ValueError from the Work).
      markBroken(message);
      work->fail(kind, message);
      return;
    }
    completed_.store(seq + seqCount - 1);
    FlightRecorder::get().finished(record, /*completed=*/true);
    work->succeed();
  };
  {
    std::lock_guard<std::mutex> guard(stateMutex_);
    addToBatchLocked(work, opName);
  }
  executor_->submit(std::move(task), !asyncOp);
  return work;
}

std::string GroupCore::statusText() const {
  return std::to_string(entered_.load()) + " " + std::to_string(completed_.load()) + " " +
         enteredOp_.load();
}

std::string GroupCore::diagnoseTimeout(uint64_t seq, std::chrono::milliseconds timeout) {
  // Peers answer from their progress threads, so even a rank stuck outside xccl replies; a
  // short bound keeps the error prompt when some cannot.
  auto bound = std::min<std::chrono::milliseconds>(std::chrono::seconds(2), timeout);
  std::vector<std::string> replies = transport_->queryStatus(net::Clock::now() + bound);
  std::vector<std::string> notEntered, waiting, silent, failed;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    uint64_t entered = 0, completed = 0;
    char op[64] = {};
    if (!replies[peer].empty() && replies[peer][0] == '!') {
      failed.push_back(std::to_string(peer));
    } else if (replies[peer].empty() ||
               std::sscanf(replies[peer].c_str(), "%" SCNu64 " %" SCNu64 " %63s", &entered,
                           &completed, op) != 3) {
      silent.push_back(std::to_string(peer));
    } else if (entered < seq) {
      notEntered.push_back(std::to_string(peer) + " (last entered #" + std::to_string(entered) +
                           " " + op + ")");
    } else if (completed < seq) {
      waiting.push_back(std::to_string(peer));
    }
  }
  auto join = [](const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
    return out;
  };
  std::string text = ". Diagnosis:";
  if (!notEntered.empty())
    text += " rank(s) " + join(notEntered) + " never entered #" + std::to_string(seq) + ";";
  if (!waiting.empty()) text += " rank(s) " + join(waiting) + " were waiting in it too;";
  if (!failed.empty()) text += " rank(s) " + join(failed) + " had already failed or given up;";
  if (!silent.empty())
    text += " rank(s) " + join(silent) + " did not answer a status query (dead or frozen process);";
  if (notEntered.empty() && silent.empty() && failed.empty()) {
    text += " every rank entered it (a slow or stuck peer link?)";
  }
  return text;
}

void GroupCore::stopMembership(const std::string& reason) {
  if (!reason.empty()) {
    {
      std::lock_guard<std::mutex> guard(stateMutex_);
      brokenReason_ = reason;  // queued work fails with it (enqueue's task checks)
      broken_.store(true);
    }
    // In-flight work and posted point-to-point wake up and fail (peers learn it as well).
    if (transport_) transport_->abort(reason);
  }
  GilReleasedIfHeld noGil;  // the joins below wait for threads that may need the GIL
  // A dump a peer asked for (statusProvider above) finishes before the process may exit.
  FlightRecorder::get().awaitWrites(std::chrono::seconds(10));
  // Queued collectives finish first (they may still be waited on); then no thread can touch
  // the transport, and its destruction ends the p2p completions.
  if (executor_) executor_->stopWorker();
}

void GroupCore::releaseMembership() {
  tuning_ = {};
  segment_.reset();
  hierarchy_.reset();
  transport_.reset();
  executor_.reset();
}

void GroupCore::renew(int rank, int size, const std::string& storePrefix) {
  {
    std::lock_guard<std::mutex> guard(stateMutex_);
    brokenReason_.clear();
    broken_.store(false);
    coalescing_ = gpuCoalescing_ = false;
    coalesced_.clear();
  }
  rank_ = rank;
  size_ = size;
  seq_.store(0);
  p2pSeq_.store(0);
  entered_.store(0);
  completed_.store(0);
  enteredOp_.store("none");
  // Windows are numbered per membership, under its store prefix: a newcomer's first window and
  // the old members' next one must get the same number and keys.
  windows_.store(0);
  // The GPU side's exchanges (store()) get keys of this membership's own.
  membershipStore_ = c10::make_intrusive<c10d::PrefixStore>(storePrefix, store_);
  membershipEpoch_.fetch_add(1);
}

}  // namespace xccl::backend
