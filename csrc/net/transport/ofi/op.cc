// Posting operations to libfabric, retrying those it defers, and forgetting finished ones.
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <thread>

#include "net/transport/ofi/cache.h"
#include "net/transport/ofi/fabric.h"
#include "net/transport/ofi/memory.h"
#include "net/transport/ofi/op.h"
#include "net/transport/ofi/transport.h"
#include "net/transport/ofi/wire.h"

namespace xccl::net::ofi {
namespace {

constexpr auto kCloseDrainTime = std::chrono::milliseconds(200);

// The transport whose progress thread runs on this thread, if any (set by onProgressThread).
thread_local const OfiTransport* progressOwner = nullptr;

}  // namespace

void OfiTransport::onProgressThread() { progressOwner = this; }

void OfiTransport::post(Op* op) {
  // Posts the progress thread defers again need no signal: it retries them after its next
  // completion or kDeferredWaitMs. Signalling from there made it spin while the provider said
  // EAGAIN (connecting to a peer: thousands of empty wake-ups in ten milliseconds).
  const bool signal = progressOwner != this;
  {
    std::lock_guard<std::mutex> guard(opsMutex_);
    live_.insert(op);
    if (!deferred_.empty()) {
      // Queued behind the deferred posts, so a peer's headers leave in the order they were
      // numbered (the receiver holds those ahead of their turn, up to a cap).
      deferred_.push_back(op);
      if (signal) fi_cq_signal(fabric_->cq());
      return;
    }
  }
  // Traced, the start is stored before the post: once posted, the op may complete and be freed.
  const Trace::Stat stat = op->type != Op::Type::kSend ? Trace::kPostReceive
                           : op->tag == kHeaderTag     ? Trace::kPostHeader
                                                       : Trace::kPostPayload;
  if (trace_.on()) op->postedNs = Trace::nowNs();
  const uint64_t start = op->postedNs;
  long ret = postNow(op);
  if (trace_.on()) trace_.add(stat, Trace::nowNs() - start);
  if (ret == -FI_EAGAIN) {
    std::lock_guard<std::mutex> guard(opsMutex_);
    deferred_.push_back(op);
    if (signal) fi_cq_signal(fabric_->cq());  // retried after draining completions
    return;
  }
  if (ret < 0) {
    // Failed on the spot: reported from the progress thread, since the caller may hold mutex_.
    std::lock_guard<std::mutex> guard(opsMutex_);
    op->postError = static_cast<int>(-ret);
    deferred_.push_back(op);
    if (signal) fi_cq_signal(fabric_->cq());
  }
}

bool OfiTransport::injectNow(const Op* op) {
  {
    std::lock_guard<std::mutex> guard(opsMutex_);
    if (!deferred_.empty()) return false;  // behind the deferred posts, as post() queues it
  }
  fid_ep* ep = fabric_->ep();
  if (ep == nullptr) return false;
  const uint64_t start = trace_.on() ? Trace::nowNs() : 0;
  const long ret = fi_tinject(ep, op->data, op->bytes, peerAddr_[op->peer], op->tag);
  if (trace_.on()) trace_.add(Trace::kInject, Trace::nowNs() - start);
  return ret == 0;  // otherwise post() retries it or reports the failure
}

long OfiTransport::postNow(Op* op) {
  fid_ep* ep = fabric_->ep();
  if (ep == nullptr) return -FI_ECANCELED;
  switch (op->type) {
    case Op::Type::kHeaderRecv:
    case Op::Type::kAuthRecv:
      // A slot for any peer's header: parseHeader, the session and (FI_SOURCE) the endpoint it
      // came from tell peers from strangers.
      return fi_trecv(ep, const_cast<void*>(op->data), op->bytes, op->desc, FI_ADDR_UNSPEC, op->tag,
                      0, &op->context);
    case Op::Type::kDataRecv:
    case Op::Type::kDiscard:
      // A payload lands in the user's buffer unchecked: with FI_DIRECTED_RECV only its sender's
      // endpoint can fill it; without, any endpoint sending its tag (sender and id) could.
      return fi_trecv(ep, const_cast<void*>(op->data), op->bytes, op->desc,
                      directed_ ? peerAddr_[op->peer] : FI_ADDR_UNSPEC, op->tag, 0, &op->context);
    case Op::Type::kSend:
      return fi_tsend(ep, op->data, op->bytes, op->desc, peerAddr_[op->peer], op->tag,
                      &op->context);
    case Op::Type::kWrite: {
      // FI_DELIVERY_COMPLETE: the write completes here only once its bytes are visible in the
      // target's memory. The default (transmit complete) may report it when the bytes merely
      // reached the target's provider, and a window's signal, sent after its puts completed,
      // must not overtake them on providers that do not order RMA writes (efa).
      iovec iov{const_cast<void*>(op->data), op->bytes};
      fi_rma_iov rma{op->remoteAddress, op->bytes, op->remoteKey};
      fi_msg_rma msg{};
      msg.msg_iov = &iov;
      msg.desc = &op->desc;
      msg.iov_count = 1;
      msg.addr = peerAddr_[op->peer];
      msg.rma_iov = &rma;
      msg.rma_iov_count = 1;
      msg.context = &op->context;
      // Signal 0 is no signal: no remote CQ data, so the target sees no completion at all.
      msg.data = op->signalled ? op->cqData : 0;
      const uint64_t flags = FI_DELIVERY_COMPLETE | (op->signalled ? FI_REMOTE_CQ_DATA : 0);
      return fi_writemsg(ep, &msg, flags);
    }
  }
  return -FI_EINVAL;
}

void OfiTransport::retryDeferred() {
  std::deque<Op*> again;
  {
    std::lock_guard<std::mutex> guard(opsMutex_);
    again.swap(deferred_);
  }
  for (Op* op : again) {
    if (op->postError != 0) {
      onError(op, op->postError, fi_strerror(op->postError));
    } else {
      post(op);
    }
  }
}

void OfiTransport::traceCompletion(const Op* op) {
  if (op->postedNs == 0) return;
  const uint64_t ns = Trace::nowNs() - op->postedNs;
  if (op->type == Op::Type::kSend) {
    trace_.add(op->tag == kHeaderTag ? Trace::kEagerSend : Trace::kRendezvousSend, ns);
  } else if (op->type == Op::Type::kDataRecv) {
    trace_.add(Trace::kRendezvousRecv, ns);
  }
}

void OfiTransport::finish(Op* op) {
  {
    std::lock_guard<std::mutex> guard(opsMutex_);
    live_.erase(op);
  }
  delete op;
}

void* OfiTransport::localDesc(Op* op, const void* data, size_t bytes) {
  if (failRegistrations_.load() > 0 && failRegistrations_.fetch_sub(1) > 0) {
    XCCL_THROW(ErrorKind::kSystem, "fi_mr_reg failed: refused by a test hook");
  }
  if (!localMr_ || bytes == 0) return nullptr;
  if (data == op->buffer.data()) {
    // The op's own bytes die with it: registered for this op alone, never cached (a cached range
    // would outlive its memory and be found again for whatever is allocated there next).
    op->region = std::make_shared<MemoryRegion>(*fabric_, data, bytes, FI_SEND | FI_RECV);
  } else {
    op->region = cache_->get(data, bytes);
  }
  return static_cast<MemoryRegion*>(op->region.get())->desc();
}

void OfiTransport::drainForClose() {
  // Cancels what is outstanding and lets the provider report it before the endpoint closes, so
  // closing does not find operations in flight. Bounded: a send to a peer that vanished may
  // never end, and then closing the endpoint drops it.
  for (Op* op : live_) fi_cancel(&fabric_->ep()->fid, &op->context);
  const Error closed(ErrorKind::kAborted, "the ofi transport was destroyed");
  const Deadline deadline = Clock::now() + kCloseDrainTime;
  fi_cq_tagged_entry entry;
  while (!live_.empty() && Clock::now() < deadline) {
    Op* op = nullptr;
    ssize_t n = fi_cq_read(fabric_->cq(), &entry, 1);
    if (n == 1) {
      op = static_cast<Op*>(entry.op_context);
    } else if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(fabric_->cq(), &err, 0) > 0) op = static_cast<Op*>(err.op_context);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (op == nullptr || live_.count(op) == 0) continue;
    if (op->request) {
      std::lock_guard<std::mutex> guard(mutex_);
      op->request->failLocked(closed);
    }
    finish(op);
  }
}

}  // namespace xccl::net::ofi
