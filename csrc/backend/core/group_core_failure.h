// FailureState: whether a group can still be used, and why not (GroupCore's part; group_core.h).
// A group is broken once a collective failed or abort() ran (the first reason is kept), and shut
// down once shutdown() ran; reconfigure (renew()) makes a broken group usable again. What a
// failure sets off (the abort hooks, the recorder's dump, aborting the transport) is GroupCore's
// markBroken(), which asks this part whether the failure is the first.
//
// Threads: every method may be called from any thread; mutex_ guards brokenReason_ and
// shutDown_, and broken_ mirrors "brokenReason_ is set" for readers that must not lock.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

namespace xccl::backend {

class FailureState {
 public:
  // On the caller's thread, before an operation: torch's error when the group was shut down
  // (RuntimeError) or failed earlier (DistBackendError).
  void checkUsable(const char* opName) const;
  // On the executor, before a queued collective's body: an Error (kAborted) once the group is
  // broken, so that work queued before the failure fails with its reason.
  void checkBeforeRun() const;
  // In a shared-memory wait (every few milliseconds): an Error (kAborted) once the group is
  // broken. A lock-free load while it is not.
  void checkInWait() const;
  // Whether the group is broken. Never blocks.
  bool broken() const { return broken_.load(); }

  // Remembers why the group failed; false (nothing changes) when it already had.
  bool markBroken(const std::string& reason);
  // The membership is ending with `reason`: queued work fails with it, replacing an earlier
  // reason (stopMembership; no hooks run and nothing is logged).
  void failQueuedWork(const std::string& reason);
  // Marks the group shut down; false when it already was.
  bool markShutDown();
  bool isShutDown() const;
  // A new membership (reconfigure): usable again. A shut-down group stays shut down.
  void renew();

 private:
  mutable std::mutex mutex_;
  std::string brokenReason_;  // non-empty once a collective failed or abort() ran
  std::atomic<bool> broken_{false};  // brokenReason_ is set: read without the lock
  bool shutDown_ = false;
};

}  // namespace xccl::backend
