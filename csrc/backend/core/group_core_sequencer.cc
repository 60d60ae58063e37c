#include "backend/core/group_core_sequencer.h"

#include <cinttypes>
#include <cstdio>

namespace xccl::backend {

Sequencer::Sequencer(c10::intrusive_ptr<c10d::Backend::Options> options)
    : options_(std::move(options)) {}

void Sequencer::stopExecutor() {
  if (executor_) executor_->stopWorker();
}

void Sequencer::entering(const char* opName, uint64_t seq) {
  enteredOp_.store(opName);
  entered_.store(seq);
}

std::string Sequencer::statusText() const {
  return std::to_string(entered_.load()) + " " + std::to_string(completed_.load()) + " " +
         enteredOp_.load();
}

void Sequencer::renew() {
  seq_.store(0);
  entered_.store(0);
  completed_.store(0);
  enteredOp_.store("none");
}

void Sequencer::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> guard(mutex_);
  options_->timeout = timeout;
}

std::chrono::milliseconds Sequencer::effectiveTimeout(std::chrono::milliseconds requested) const {
  if (requested != c10d::kUnsetTimeout) return requested;
  std::lock_guard<std::mutex> guard(mutex_);
  return options_->timeout;
}

std::string Sequencer::torchTimeoutWording(int rank, c10d::OpType type, uint64_t seq,
                                           std::chrono::milliseconds ranFor,
                                           std::chrono::milliseconds timeout) {
  return "[Rank " + std::to_string(rank) +
         "] Watchdog caught collective operation timeout: WorkXccl(SeqNum=" + std::to_string(seq) +
         ", OpType=" + c10d::opTypeToString(type) +
         ", Timeout(ms)=" + std::to_string(timeout.count()) + ") ran for " +
         std::to_string(ranFor.count()) + " milliseconds before timing out. Timed out waiting " +
         std::to_string(timeout.count()) + "ms; ";
}

std::string Sequencer::diagnoseTimeout(const std::vector<std::string>& replies, int rank, int size,
                                       uint64_t seq) {
  std::vector<std::string> notEntered, waiting, silent, failed;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
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

}  // namespace xccl::backend
