#include "net/transport/transport.h"

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>

#include "common/types.h"
#include "common/wait_slice.h"

namespace xccl::net {

std::string describe(const MessageTag& tag) {
  std::ostringstream out;
  if (tag.space == TagSpace::kPointToPoint) {
    out << "p2p tag " << tag.seq;
  } else if (tag.space == TagSpace::kMonitoredBarrier) {
    out << "monitored_barrier #" << tag.seq << " step " << tag.step;
  } else {
    out << "collective #" << tag.seq << " step " << tag.step;
  }
  return out.str();
}

bool collectivesDiffer(const MessageTag& wanted, const MessageTag& sent) {
  return wanted.space == TagSpace::kCollective && sent.space == TagSpace::kCollective &&
         wanted.seq == sent.seq && wanted.op != sent.op;
}

Error collectiveMismatch(int peer, const MessageTag& wanted, const MessageTag& sent) {
  return Error(ErrorKind::kPeerFailure,
               detail::concat("rank ", peer, " ran ", describeOpSignature(sent.op),
                              " as collective #", sent.seq, " where this rank ran ",
                              describeOpSignature(wanted.op),
                              ": the ranks called different collectives (or with different "
                              "dtypes or reduce ops) in the same order position"));
}

void Request::rethrowIfFailed() const {
  if (state() == State::kFailed) throw *error_;
}

std::string Request::errorMessage() const {
  return state() == State::kFailed ? std::string(error_->what()) : std::string();
}

void Request::completeLocked(int sourcePeer) {
  if (done()) return;
  peer_ = sourcePeer;
  state_.store(State::kDone, std::memory_order_release);
  if (onDone_) onDone_(*this);
}

void Request::failLocked(const Error& error) {
  if (done()) return;
  error_ = std::make_unique<Error>(error);
  state_.store(State::kFailed, std::memory_order_release);
  if (onDone_) onDone_(*this);
}

std::string describeTimeout(const std::vector<RequestPtr>& requests, const std::string& what) {
  std::set<int> recvFrom, sendTo;
  for (const auto& r : requests) {
    if (r->done()) continue;
    (r->isSend() ? sendTo : recvFrom).insert(r->peer());
  }
  std::ostringstream out;
  out << what << " timed out";
  auto list = [&](const std::set<int>& ranks) {
    std::ostringstream s;
    s << "[";
    bool first = true;
    for (int r : ranks) {
      s << (first ? "" : ", ") << (r == kAnySource ? std::string("any") : std::to_string(r));
      first = false;
    }
    s << "]";
    return s.str();
  };
  if (!recvFrom.empty()) out << "; no data from rank(s) " << list(recvFrom);
  if (!sendTo.empty()) out << "; rank(s) " << list(sendTo) << " did not take our data";
  return out.str();
}

Error sizeMismatchError(int peer, const MessageTag& tag, size_t sent, size_t expected) {
  return Error(ErrorKind::kPeerFailure, detail::concat("rank ", peer, " sent ", sent, " bytes for ",
                                                       describe(tag), " where ", expected,
                                                       " were expected (the ranks called different "
                                                       "collectives, or with different sizes)"));
}

void waitForRequests(std::unique_lock<std::mutex>& lock, std::condition_variable& completed,
                     const std::vector<RequestPtr>& requests, Deadline deadline,
                     const std::string& what) {
  const auto allDone = [&] {
    return std::all_of(requests.begin(), requests.end(),
                       [](const RequestPtr& r) { return r->done(); });
  };
  std::optional<wait_slice::WhileWaiting> slice;  // only for a wait that will sleep
  if (!allDone()) slice.emplace();
  const bool done = completed.wait_until(lock, deadline, allDone);
  lock.unlock();
  if (!done) XCCL_THROW(ErrorKind::kTimeout, describeTimeout(requests, what));
  for (const auto& r : requests) {
    try {
      r->rethrowIfFailed();
    } catch (const Error& e) {
      throw Error(e.kind(), what + " failed: " + e.what());
    }
  }
}

std::unique_ptr<Registration> Transport::registerMemory(void*, size_t) {
  XCCL_THROW(ErrorKind::kInvalidArgument, "the ", name(),
             " transport does not support one-sided writes");
}

RequestPtr Transport::iwrite(int, const void*, size_t, const RemoteRegion&, uint64_t, uint64_t,
                             Completion) {
  XCCL_THROW(ErrorKind::kInvalidArgument, "the ", name(),
             " transport does not support one-sided writes");
}

RequestPtr Transport::iwaitWrite(int, uint64_t, Completion) {
  XCCL_THROW(ErrorKind::kInvalidArgument, "the ", name(),
             " transport does not support one-sided writes");
}

}  // namespace xccl::net
