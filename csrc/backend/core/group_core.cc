#include "backend/core/group_core.h"

#include <algorithm>

#include "algo/context.h"
#include "backend/core/gil.h"
#include "backend/core/torch_error.h"
#include "backend/recorder/flight_recorder.h"
#include "common/logging.h"

namespace xccl::backend {

GroupCore::GroupCore(const c10d::Backend& face, c10::intrusive_ptr<c10d::Backend::Options> options,
                     c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                     std::shared_ptr<const GroupPolicy> policy)
    : policy_(policy ? std::move(policy) : std::make_shared<const GroupPolicy>()),
      membership_(options, std::move(store), rank, size, failure_, *policy_),
      sequencer_(options),
      recorder_(face, std::move(options), membership_, sequencer_) {}

void GroupCore::connect(net::Store& store, std::chrono::milliseconds timeout,
                        const ConnectOptions& opts) {
  sequencer_.start();
  membership_.connect(store, timeout, opts);
  membership_.transport()->setStatusProvider([this] {
    // Peers ask only after a timeout: this rank's flight recorder dump joins theirs. Off this
    // (progress) thread, which must answer at once.
    FlightRecorder::get().requestWrite();
    return sequencer_.statusText();
  });
}

void GroupCore::checkUsable(const char* opName) const {
  failure_.checkUsable(opName);
  membership_.checkHasMembers(opName);
}

void GroupCore::markBroken(const std::string& reason) {
  if (!failure_.markBroken(reason)) return;
  XCCL_WARN("backend", reason);
  // Once, before the group fails: each abort hook once (their exceptions are logged, never
  // propagated), then the flight recorder's dump.
  abortHooks_.runOnce();
  FlightRecorder::get().write("", /*onlyActive=*/false);
  membership_.abortTransport(reason);
}

GroupCore::WorkPtr GroupCore::enqueue(c10d::OpType type, const char* opName,
                                      std::vector<at::Tensor> outputs,
                                      std::optional<std::vector<at::Tensor>> inputs,
                                      std::chrono::milliseconds timeout, bool asyncOp, Body body,
                                      uint64_t seqCount) {
  checkUsable(opName);
  const uint64_t seq = sequencer_.take(seqCount);
  const uint64_t record =
      recorder_.recordCollective(type, seq, seqCount, inputs ? *inputs : outputs, outputs, timeout);
  const int rank = membership_.rank();
  auto work = c10::make_intrusive<XcclWork>(rank, type, opName, seq, std::move(outputs), timeout);
  std::string what = std::string(opName) + " #" + std::to_string(seq);
  auto task = [this, work, what, timeout, type, opName, seqCount, record,
               body = std::move(body)]() {
    const uint64_t seq = work->getSequencenumber();
    sequencer_.entering(opName, seq);
    FlightRecorder::get().started(record);
    const auto began = std::chrono::steady_clock::now();
    try {
      failure_.checkBeforeRun();
      algo::Context ctx{*membership_.transport(), seq, what, net::Clock::now() + timeout,
                        membership_.tunables()};
      body(algo::Runner{ctx, membership_.segment(), membership_.alive(), membership_.hierarchy(),
                        membership_.tuning(), membership_.shape()});
    } catch (const std::exception& e) {
      std::string message =
          std::string("rank ") + std::to_string(membership_.rank()) + ": " + e.what();
      if (message.find(what) == std::string::npos) {
        message = what + " failed on " + message;
      }
      const ErrorKind kind = errorKindOf(e);
      if (kind == ErrorKind::kTimeout) {
        auto ranFor = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - began);
        message = Sequencer::torchTimeoutWording(membership_.rank(), type, seq, ranFor, timeout) +
                  message + diagnoseTimeout(seq, timeout);
      }
      sequencer_.completedUpTo(seq + seqCount - 1);
      FlightRecorder::get().finished(record, /*completed=*/false);
      // Peers may be inside this collective: the group fails whatever the kind (a bad argument
      // found only here still raises ValueError from the Work).
      markBroken(message);
      work->fail(kind, message);
      return;
    }
    sequencer_.completedUpTo(seq + seqCount - 1);
    FlightRecorder::get().finished(record, /*completed=*/true);
    work->succeed();
  };
  batch_.add(work, opName);
  sequencer_.executor()->submit(std::move(task), !asyncOp);
  return work;
}

std::string GroupCore::diagnoseTimeout(uint64_t seq, std::chrono::milliseconds timeout) {
  // Peers answer from their progress threads, so even a rank stuck outside xccl replies; a
  // short bound keeps the error prompt when some cannot.
  auto bound = std::min<std::chrono::milliseconds>(std::chrono::seconds(2), timeout);
  std::vector<std::string> replies =
      membership_.transport()->queryStatus(net::Clock::now() + bound);
  return Sequencer::diagnoseTimeout(replies, membership_.rank(), membership_.size(), seq);
}

GroupCore::WorkPtr GroupCore::endCoalescing() {
  return batch_.end(membership_.rank(), sequencer_.sequenceNumber(), sequencer_.timeout());
}

void GroupCore::stopMembership(const std::string& reason) {
  if (!reason.empty()) {
    failure_.failQueuedWork(reason);  // queued work fails with it (enqueue's task checks)
    // In-flight work and posted point-to-point wake up and fail (peers learn it as well).
    membership_.abortTransport(reason);
  }
  GilReleasedIfHeld noGil;  // the joins below wait for threads that may need the GIL
  // A dump a peer asked for (statusProvider above) finishes before the process may exit.
  FlightRecorder::get().awaitWrites(std::chrono::seconds(10));
  // Queued collectives finish first (they may still be waited on); then no thread can touch
  // the transport, and its destruction ends the p2p completions.
  sequencer_.stopExecutor();
}

void GroupCore::releaseMembership() {
  membership_.release();
  sequencer_.release();
}

void GroupCore::renew(int rank, int size, const std::string& storePrefix) {
  failure_.renew();
  batch_.clear();
  sequencer_.renew();
  recorder_.renew();
  membership_.renew(rank, size, storePrefix);
}

}  // namespace xccl::backend
