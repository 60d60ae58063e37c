// Sequencer: the order a group's collectives run in (GroupCore's part; group_core.h). It numbers
// them (every rank gives the n-th collective the same number), runs them on the Executor in that
// order, keeps the progress a peer's status query reads (the last collective entered and
// completed), holds the group's timeout, and words a timeout's error: torch's wording and the
// diagnosis from the peers' progress.
//
// Threads: every method may be called from any thread, except that start(), stopExecutor(),
// release() and renew() run with no operation in flight (the face's membership changes). The
// counters are atomics, readable from the transport's progress thread without locks; mutex_
// guards the options' timeout, which setTimeout() changes while collectives read it.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/core/executor.h"

namespace xccl::backend {

class Sequencer {
 public:
  // `options` are the face's; their timeout is the group's.
  explicit Sequencer(c10::intrusive_ptr<c10d::Backend::Options> options);

  // The executor lives as long as a membership: start() builds it (connect, or a group without
  // members yet), stopExecutor() runs what is queued and joins its worker (later submits run
  // inline), release() destroys it.
  void start() { executor_ = std::make_unique<Executor>(); }
  void stopExecutor();
  void release() { executor_.reset(); }
  // Null before start() and after release().
  Executor* executor() const { return executor_.get(); }

  // Takes `count` consecutive sequence numbers; returns the first.
  uint64_t take(uint64_t count) { return seq_.fetch_add(count) + 1; }
  // The sequence number of the last collective enqueued (point-to-point takes none).
  uint64_t sequenceNumber() const { return seq_.load(); }
  // Progress: collective `seq` (`opName`) starts, or every collective up to `last` finished
  // (either way).
  void entering(const char* opName, uint64_t seq);
  void completedUpTo(uint64_t last) { completed_.store(last); }
  // What this rank answers to a peer's status query: "<entered> <completed> <op>".
  std::string statusText() const;
  // A new membership (reconfigure): numbering and progress back to 0.
  void renew();

  // Timeouts: `requested`, or the group's when it is c10d::kUnsetTimeout.
  std::chrono::milliseconds effectiveTimeout(std::chrono::milliseconds requested) const;
  std::chrono::milliseconds timeout() const { return effectiveTimeout(c10d::kUnsetTimeout); }
  void setTimeout(std::chrono::milliseconds timeout);

  // torch's wording for a collective that timed out on rank `rank` (ProcessGroupNCCL's
  // watchdog, Gloo's "Timed out waiting"), ahead of xccl's own message; `ranFor` is how long
  // it ran.
  static std::string torchTimeoutWording(int rank, c10d::OpType type, uint64_t seq,
                                         std::chrono::milliseconds ranFor,
                                         std::chrono::milliseconds timeout);
  // After a timeout in collective `seq` on rank `rank` of `size`: from the peers' answers to a
  // status query (`replies`, one per group rank: statusText(), "!..." from a peer that failed,
  // or empty from one that did not answer), which ranks never entered it (the ones to look at)
  // and which were waiting like us.
  static std::string diagnoseTimeout(const std::vector<std::string>& replies, int rank, int size,
                                     uint64_t seq);

 private:
  const c10::intrusive_ptr<c10d::Backend::Options> options_;
  mutable std::mutex mutex_;  // guards options_->timeout
  std::unique_ptr<Executor> executor_;
  std::atomic<uint64_t> seq_{0};
  // Progress, readable from the transport's progress thread without locks.
  std::atomic<uint64_t> entered_{0};  // sequence number of the last collective started
  std::atomic<uint64_t> completed_{0};  // ... and of the last one finished (either way)
  std::atomic<const char*> enteredOp_{"none"};
};

}  // namespace xccl::backend
