#include "backend/core/group_core_failure.h"

#include <c10/util/Exception.h>

#include "backend/core/torch_error.h"
#include "common/error.h"

namespace xccl::backend {

void FailureState::checkUsable(const char* opName) const {
  std::lock_guard<std::mutex> guard(mutex_);
  TORCH_CHECK(!shutDown_, "xccl ", opName, ": the process group was shut down");
  if (!brokenReason_.empty()) {
    throwTorchError(ErrorKind::kAborted, std::string("xccl ") + opName +
                                             ": the process group is unusable after an earlier "
                                             "failure: " +
                                             brokenReason_);
  }
}

void FailureState::checkBeforeRun() const {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!brokenReason_.empty()) {
    throw Error(ErrorKind::kAborted, "the process group is unusable after an earlier "
                                     "failure: " +
                                         brokenReason_);
  }
}

// Called by shared-memory waits that already slept (every few milliseconds per peer): cheap.
void FailureState::checkInWait() const {
  if (broken_.load()) {
    std::lock_guard<std::mutex> guard(mutex_);
    throw Error(ErrorKind::kAborted, "the process group is unusable: " + brokenReason_);
  }
}

bool FailureState::markBroken(const std::string& reason) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!brokenReason_.empty()) return false;
  brokenReason_ = reason;
  broken_.store(true);
  return true;
}

void FailureState::failQueuedWork(const std::string& reason) {
  std::lock_guard<std::mutex> guard(mutex_);
  brokenReason_ = reason;
  broken_.store(true);
}

bool FailureState::markShutDown() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (shutDown_) return false;
  shutDown_ = true;
  return true;
}

bool FailureState::isShutDown() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return shutDown_;
}

void FailureState::renew() {
  std::lock_guard<std::mutex> guard(mutex_);
  brokenReason_.clear();
  broken_.store(false);
}

}  // namespace xccl::backend
