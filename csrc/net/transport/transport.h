// The one transport interface every algorithm sees (NCCL-net style non-blocking isend/irecv).
//
// A message is matched by (source rank, MessageTag). Messages from one source with equal tags
// match receives in posting order (FIFO), which is what point-to-point semantics need;
// collectives make every tag unique by putting their sequence number and step into it.
// The interface is fit for RDMA: memory is registered before peers write into it
// (registerMemory), and a one-sided write carries a 64-bit signal that completes a matching
// iwaitWrite at the target once the written bytes are visible there (libfabric's fi_writedata
// with remote CQ data; emulated by a frame over TCP, by a copy over shared memory).
// Transports, each in a folder with the same file names (transport.{h,cc}, ...): tcp/ (any hosts),
// ofi/ (libfabric, across hosts), shm/ (one host); net/transport/factory.h picks one per peer.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/error.h"
#include "net/rendezvous/deadline.h"

namespace xccl::net {

constexpr int kAnySource = -1;

enum class TagSpace : uint16_t {
  kCollective = 1,  // seq = collective sequence number, step = algorithm step / chunk
  kPointToPoint = 2,  // seq = user tag, step = 0; FIFO per (source, tag)
  // seq = the group's monitored_barrier count, step = arrival (to rank 0) or release (from it);
  // apart from collectives so that a rank skipping one leaves their sequence numbers aligned.
  kMonitoredBarrier = 3,
};

struct MessageTag {
  TagSpace space = TagSpace::kCollective;
  uint32_t step = 0;
  uint64_t seq = 0;
  // The collective's signature (common/types.h opSignature); 0 for point-to-point. Receives
  // match only messages with an equal signature; one that differs at the same sequence number
  // fails the receive with an error naming both (the ranks called different collectives).
  uint32_t op = 0;

  bool operator==(const MessageTag& other) const {
    return space == other.space && step == other.step && seq == other.seq && op == other.op;
  }
};
std::string describe(const MessageTag& tag);

// Whether a message tagged `sent` belongs to the same collective call as a receive tagged
// `wanted` but to a different collective (see MessageTag::op), whatever their steps.
bool collectivesDiffer(const MessageTag& wanted, const MessageTag& sent);
// The error for that case, from the receiving rank's point of view.
Error collectiveMismatch(int peer, const MessageTag& wanted, const MessageTag& sent);

// Completion of one isend/irecv. Completed by the transport's progress thread; waited on by the
// caller through Transport::wait so every wait is bounded and reports which peer was missing.
class Request;
// Called once when a request completes or fails, on the thread that completed it and with the
// transport's lock held: it must be quick and must not call back into the transport.
using Completion = std::function<void(const Request&)>;

class Request {
 public:
  enum class State { kPending, kDone, kFailed };

  Request(int peer, MessageTag tag, size_t bytes, bool isSend, Completion onDone = nullptr)
      : peer_(peer), tag_(tag), bytes_(bytes), isSend_(isSend), onDone_(std::move(onDone)) {}

  State state() const { return state_.load(std::memory_order_acquire); }
  bool done() const { return state() != State::kPending; }
  int peer() const { return peer_; }  // for kAnySource receives: the sender once done
  MessageTag tag() const { return tag_; }
  size_t bytes() const { return bytes_; }
  bool isSend() const { return isSend_; }
  // Throws the stored error if the request failed; no-op when it succeeded or is pending.
  void rethrowIfFailed() const;
  // The failure's message; empty unless failed.
  std::string errorMessage() const;

  // Called by the transport with its completion mutex held; the first call wins.
  void completeLocked(int sourcePeer);
  void failLocked(const Error& error);

 private:
  std::atomic<State> state_{State::kPending};
  int peer_;
  MessageTag tag_;
  size_t bytes_;
  bool isSend_;
  Completion onDone_;
  std::unique_ptr<Error> error_;  // written before state_ becomes kFailed (release)
};

using RequestPtr = std::shared_ptr<Request>;

// Fails `request` (the transport's lock held) and returns it: an operation refused when issued.
inline RequestPtr failedRequest(RequestPtr request, const Error& error) {
  request->failLocked(error);
  return request;
}

// What a peer needs to write into memory registered with Transport::registerMemory: sent to it
// by any means (a message, the store). Plain data, the same layout in every transport.
struct RemoteRegion {
  uint64_t address = 0;  // where the region starts in the owner's address space
  uint64_t bytes = 0;
  uint64_t key = 0;  // the transport's access key (libfabric's MR key; a random id over TCP)
  // The same memory's key in the shared-memory transport, for writers on the owner's host. A
  // group's transport may carry each peer over a different transport
  // (net/transport/routed_transport.h), and one region handed to every peer must work for all of
  // them: the network engine's key in `key`, shared memory's here (0 where there is none).
  uint64_t hostKey = 0;
};

// Memory registered with a transport; deregistered when destroyed (before the memory goes).
class Registration {
 public:
  virtual ~Registration() = default;
  virtual RemoteRegion remote() const = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* name() const = 0;

  // Both return at once. `data` must stay valid (and, for sends, unchanged) until the request
  // is done. A failed peer or an aborted transport yields a request that is already failed.
  virtual RequestPtr isend(int peer, MessageTag tag, const void* data, size_t bytes,
                           Completion onDone = nullptr) = 0;
  virtual RequestPtr irecv(int peer, MessageTag tag, void* data, size_t bytes,
                           Completion onDone = nullptr) = 0;

  // Blocks (without spinning) until every request is done or `deadline` passes. Throws the
  // first failure, or kTimeout naming `what` and the peers whose requests are still pending.
  virtual void wait(const std::vector<RequestPtr>& requests, Deadline deadline,
                    const std::string& what) = 0;

  // Fails every pending and future request with `reason` and tells the peers, so that a
  // failure on one rank reaches every rank promptly instead of leaving them to time out.
  virtual void abort(const std::string& reason) = 0;

  // Diagnosis after a timeout. Every peer's transport answers a status query from its own
  // progress thread with what its provider returns, even while the peer's main thread is
  // stuck elsewhere, so a hang can be traced to the rank that never arrived.
  // The provider runs on the progress thread: it must be quick and must not block.
  virtual void setStatusProvider(std::function<std::string()> provider) = 0;
  // Asks every live peer; result[peer] is its answer, empty if none came by `deadline`, or
  // "!" and the error for a peer already known to have failed (result[rank()] is our own
  // provider's answer).
  virtual std::vector<std::string> queryStatus(Deadline deadline) = 0;

  // Whether `peer` is known to have failed (its connection closed, it aborted the communicator)
  // or this transport was aborted, so that `peer` can no longer be reached; `why` (may be null)
  // receives the error. Cheap and non-blocking, for waits outside the transport (shared
  // memory). A transport that cannot tell says false.
  virtual bool peerFailed(int peer, std::string* why) { return false; }

  // One-sided transfers. registerMemory makes [data, data + bytes) writable by peers that hold
  // its remote(); it must stay valid until the Registration is destroyed. iwrite copies `bytes`
  // from `data` to `dst` + `dstOffset` on `peer` (out of range: the request fails with
  // kInvalidArgument, nothing written) and, once the bytes are visible at the target, completes
  // the target's iwaitWrite(rank(), signal). Writes with equal signals from one source complete
  // waits in order; a signal that arrives before its wait is kept (counted), like an unexpected
  // message. Signal 0 means no signal: such a write completes no wait and is not counted (a
  // window issues many puts whose signal nobody waits for; counting them would grow a table
  // forever), and iwaitWrite(peer, 0) throws kInvalidArgument. The writer's request completes
  // only once the bytes are visible at the target (TCP and shared memory: the target's
  // acknowledgement; libfabric: FI_DELIVERY_COMPLETE), so a write issued after another
  // completed cannot overtake it. A transport without one-sided support throws
  // kInvalidArgument naming itself.
  virtual std::unique_ptr<Registration> registerMemory(void* data, size_t bytes);
  virtual RequestPtr iwrite(int peer, const void* data, size_t bytes, const RemoteRegion& dst,
                            uint64_t dstOffset, uint64_t signal, Completion onDone = nullptr);
  virtual RequestPtr iwaitWrite(int peer, uint64_t signal, Completion onDone = nullptr);
};

// Builds the timeout message: "<what> timed out; no data from rank(s) [a, b]".
std::string describeTimeout(const std::vector<RequestPtr>& requests, const std::string& what);

// The error for a message of `sent` bytes from `peer` where the receive expected `expected`.
Error sizeMismatchError(int peer, const MessageTag& tag, size_t sent, size_t expected);

// Transport::wait for a transport whose completions notify `completed` with `lock`'s mutex held
// (or taken after the request is done): sleeps until every request is done or `deadline`, then
// throws the first failure or the timeout as wait() says.
void waitForRequests(std::unique_lock<std::mutex>& lock, std::condition_variable& completed,
                     const std::vector<RequestPtr>& requests, Deadline deadline,
                     const std::string& what);

}  // namespace xccl::net
