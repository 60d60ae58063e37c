#include "backend/process_group.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "backend/flight_recorder.h"
#include "backend/gil.h"
#include "backend/machine.h"
#include "backend/store_adapter.h"
#include "backend/torch_error.h"
#include "common/env.h"
#include "common/logging.h"
#include "net/address.h"
#include "net/agree.h"
#include "net/factory.h"
#include "net/incarnation.h"
#include "topo/affinity.h"
#include "topo/topology.h"

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

// The group's store moved under this creation's own scope (net/incarnation.h), so that nothing
// an earlier attempt or creation left in the store is ever read. Collective: the creation's first
// exchange. Members of a reconfigurable group create it at different times (a newcomer joins
// later), so they share the launcher's scope only; reconfigure uuids scope their memberships.
c10::intrusive_ptr<c10d::Store> enterIncarnation(const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int size, bool reconfigurable,
                                                 std::chrono::milliseconds timeout) {
  const std::string scope = net::launcherScopeFromEnvironment();
  net::Incarnation incarnation = net::sharedIncarnation(scope);
  if (!reconfigurable) {
    StoreAdapter adapter(store, "");
    incarnation = net::newIncarnation(adapter, scope, rank, size, timeout);
  }
  XCCL_DEBUG("backend", "group keys under '", incarnation.prefix, "'");
  return c10::make_intrusive<IncarnationStore>(incarnation.prefix, store,
                                               incarnation.token != 0 ? incarnation.tag() : "");
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

const topo::Topology& thisMachine() {
  static const topo::Topology machine = topo::discover();
  return machine;
}

ProcessGroupXccl::ProcessGroupXccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   c10::intrusive_ptr<Options> options)
    : c10d::Backend(rank, size),
      options_(std::move(options)),
      store_(store),
      recorderGroupId_(FlightRecorder::get().newGroupId()) {
  TORCH_CHECK_VALUE(options_, "xccl: options must not be None");
  TORCH_CHECK_VALUE(size >= 1 && rank >= 0 && rank < size, "xccl: bad rank ", rank,
                    " for group size ", size);
  try {
    log::setRankOnce(rank);  // the first group created is normally the world
    // A typo in any XCCL_* variable is a ValueError here, not a failure at first use.
    env::checkAll();
    tunables_ = algo::Tunables::fromEnvironment();
    if (!options_->algorithm.empty()) tunables_.forced = algo::parseAlgorithm(options_->algorithm);
    bool reconfigurable = false;
#if XCCL_TORCH_HAS_RECONFIGURE
    reconfigurable = options_->enable_reconfigure;
#endif
    store_ = enterIncarnation(store_, rank, size, reconfigurable, setupTimeout());
    StoreAdapter adapter(store_, "xccl/");
    // A group created for reconfigure connects nothing: reconfigure() forms its membership.
    if (!startUnconnected(adapter)) connectMembership(adapter, setupTimeout());
  } catch (const Error& e) {
    throwTorchError(e.kind(), e.what());
  }
  describeToRecorder();  // a dump names this rank's file even before its first operation
  init();
  if (!handle_.empty()) {
    XCCL_INFO("backend", "group '", options_->group_name,
              "' created for reconfigure: no members until torch.distributed._reconfigure");
    return;
  }
  XCCL_INFO("backend", "group '", options_->group_name, "' rank ", rank, " of ", size,
            " ready (collectives over ", transportName(), ", messages to peers over ",
            transport_->name(), ")");
}

std::chrono::milliseconds ProcessGroupXccl::setupTimeout() const {
  // Building a membership (settings agreement, TCP mesh) waits for every rank: bounded by
  // XCCL_CONNECT_TIMEOUT_MS when set, else by the group timeout.
  return env::getString("XCCL_CONNECT_TIMEOUT_MS").empty()
             ? timeout()
             : std::chrono::milliseconds(env::getInt("XCCL_CONNECT_TIMEOUT_MS"));
}

void ProcessGroupXccl::connectMembership(net::Store& store, std::chrono::milliseconds timeout) {
  executor_ = std::make_unique<Executor>();
  cpu_ = std::make_unique<CpuSide>(*this);
  if (size_ > 1) {
    // What decides routes and algorithms must be equal on every rank, or ranks would take
    // different paths through one collective and deadlock: every rank fails alike instead,
    // naming the setting and which ranks have which value.
    net::Settings settings = env::groupWideSettings();
    settings.emplace_back("ProcessGroupXccl.Options.algorithm", options_->algorithm);
    net::agreeOnSettings(store, "settings", rank_, size_, settings, timeout);
  }
  // Per peer: shared memory on this host, XCCL_NET's engine to other hosts (net/factory.h).
  net::NetOptions net;
  net.storeHost = options_->storeHost;
  net.timeout = timeout;
  // The interface TCP listens on (it makes the same choice from storeHost), to pin near its NIC.
  net.progressCpus = progressCpus(net::chooseListenAddress(options_->storeHost));
  net.ifnames = netIfnames();
  transport_ = net::createTransport(store, rank_, size_, net);
  setUpSharedMemory(store);
  transport_->setStatusProvider([this] {
    // Peers ask only after a timeout: this rank's flight recorder dump joins theirs. Off this
    // (progress) thread, which must answer at once.
    FlightRecorder::get().requestWrite();
    return statusText();
  });
}

ProcessGroupXccl::~ProcessGroupXccl() { shutdown(); }

void ProcessGroupXccl::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> guard(stateMutex_);
  options_->timeout = timeout;
}

std::chrono::milliseconds ProcessGroupXccl::effectiveTimeout(
    std::chrono::milliseconds requested) const {
  if (requested != c10d::kUnsetTimeout) return requested;
  std::lock_guard<std::mutex> guard(stateMutex_);
  return options_->timeout;
}

void ProcessGroupXccl::checkUsable(const char* opName) const {
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

void ProcessGroupXccl::markBroken(const std::string& reason) {
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

c10::intrusive_ptr<c10d::Work> ProcessGroupXccl::enqueue(
    c10d::OpType type, const char* opName, std::vector<at::Tensor> outputs,
    std::optional<std::vector<at::Tensor>> inputs, std::chrono::milliseconds timeout, bool asyncOp,
    Body body, uint64_t seqCount) {
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
      body(algo::Runner{ctx, segment_.get(), alive_, hierarchy_.get()});
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

std::string ProcessGroupXccl::statusText() const {
  return std::to_string(entered_.load()) + " " + std::to_string(completed_.load()) + " " +
         enteredOp_.load();
}

std::string ProcessGroupXccl::diagnoseTimeout(uint64_t seq, std::chrono::milliseconds timeout) {
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

c10::intrusive_ptr<c10d::Backend> ProcessGroupXccl::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  if (it == ranks.end()) return nullptr;
  auto childOptions = c10::make_intrusive<Options>(*options_);
  if (auto* given = dynamic_cast<Options*>(opts.get())) {
    childOptions = c10::make_intrusive<Options>(*given);
  } else if (opts) {
    childOptions->timeout = opts->timeout;
    childOptions->group_name = opts->group_name;
    childOptions->global_ranks_in_group = opts->global_ranks_in_group;
  }
  int childRank = static_cast<int>(std::distance(ranks.begin(), it));
  // The child's keys get a prefix of their own, whatever store torch hands over: with torch
  // 2.13 a second split of one parent connected to stale addresses (connections refused, 3 of 5
  // runs of test_split_group_via_cpp_binding[4]; 0 of 5 with this prefix), so torch's splits
  // there can share keys. Every member splits in the same order, so counting the splits per
  // member list names each one alike on all its members.
  std::string prefix = "xccl/split/";
  for (int r : ranks) prefix += std::to_string(r) + ",";
  {
    std::lock_guard<std::mutex> guard(stateMutex_);
    prefix += "/" + std::to_string(splitCounts_[ranks]++) + "/";
  }
  auto childStore = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
  return c10::make_intrusive<ProcessGroupXccl>(childStore, childRank,
                                               static_cast<int>(ranks.size()),
                                               std::move(childOptions));
}

void ProcessGroupXccl::abort() {
  markBroken("abort() was called on rank " + std::to_string(rank_));
  abortGpu();
}

void ProcessGroupXccl::shutdown() {
  {
    std::lock_guard<std::mutex> guard(stateMutex_);
    if (shutDown_) return;
    shutDown_ = true;
  }
  dropMembership("");
}

void ProcessGroupXccl::dropMembership(const std::string& reason) {
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
  {
    std::lock_guard<std::mutex> guard(gpuMutex_);
    if (gpu_)
      gpu_->shutdown(std::min<std::chrono::milliseconds>(timeout(), std::chrono::seconds(30)));
    gpu_.reset();
  }
  segment_.reset();
  hierarchy_.reset();
  transport_.reset();
  executor_.reset();
}

}  // namespace xccl::backend
