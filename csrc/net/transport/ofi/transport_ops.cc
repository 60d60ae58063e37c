// OfiTransport's caller-facing send/receive operations, matching and failure handling (setup
// and the progress thread are in transport.cc, one-sided writes in memory.cc).
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <sys/resource.h>

#include <algorithm>
#include <cstring>

#include "common/logging.h"
#include "net/transport/ofi/cache.h"
#include "net/transport/ofi/fabric.h"
#include "net/transport/ofi/op.h"
#include "net/transport/ofi/transport.h"
#include "net/transport/ofi/wire.h"

namespace xccl::net::ofi {
namespace {

constexpr auto kAbortNoticeTime = std::chrono::seconds(1);
// A mismatched payload is received whole into scratch memory (discardData says why), but never
// more than this: the size comes from the peer's header.
constexpr uint64_t kMaxDiscardBytes = uint64_t{1} << 30;

}  // namespace

RequestPtr OfiTransport::sendMessage(int peer, Header header, const void* data,
                                     RequestPtr request) {
  header.source = rank_;
  header.session = session_;
  const bool eager = header.bytes <= kEagerBytes;
  header.inlineBytes = eager ? static_cast<uint32_t>(header.bytes) : 0;
  Op* head = Op::make(Op::Type::kSend, peer, request);
  head->completes = eager;
  head->tag = kHeaderTag;
  head->buffer.resize(sizeof(Header) + header.inlineBytes);
  if (header.inlineBytes > 0) {
    std::memcpy(head->buffer.data() + sizeof(Header), data, header.inlineBytes);
  }
  head->data = head->buffer.data();
  head->bytes = head->buffer.size();
  Op* payload = nullptr;
  if (!eager) {
    payload = Op::make(Op::Type::kSend, peer, request);
    payload->data = data;
    payload->bytes = header.bytes;
  }
  // A small data header is injected: the provider copies it and no completion follows, so
  // neither the progress thread nor the caller wakes for it (XCCL_OFI_TRACE measured a wake-up
  // of each per message); an eager send's request is then done at once. Control messages keep
  // their completion: abort() waits for those to leave before the endpoint may close.
  const bool inject = header.kind == Kind::kData && head->bytes <= injectBytes_;
  try {
    head->desc = localDesc(head, head->data, head->bytes);
    if (payload != nullptr) payload->desc = localDesc(payload, data, header.bytes);
  } catch (const Error& e) {
    delete head;
    delete payload;
    std::lock_guard<std::mutex> guard(mutex_);
    return failedRequest(request, e);
  }
  // Numbered only now that nothing can fail before the post: the receiver delivers this
  // peer's headers in stream order, so a number taken and never sent would hold back every
  // later one. (A post the provider fails marks the peer failed here: it is unreachable.)
  {
    std::lock_guard<std::mutex> guard(sendMutex_);
    header.stream = sendStream_[peer]++;
    if (!eager) header.dataId = ++nextDataId_;
  }
  std::memcpy(head->buffer.data(), &header, sizeof(Header));
  if (payload != nullptr) payload->tag = dataTag(rank_, header.dataId);
  if (inject && injectNow(head)) {
    delete head;
    if (payload == nullptr) {
      std::lock_guard<std::mutex> guard(mutex_);
      request->completeLocked(peer);
      return request;
    }
  } else {
    post(head);
  }
  if (payload != nullptr) post(payload);
  return request;
}

RequestPtr OfiTransport::isend(int peer, MessageTag tag, const void* data, size_t bytes,
                               Completion onDone) {
  bool refused = false;
  RequestPtr request = newSend(peer, tag, bytes, std::move(onDone), &refused);
  if (refused) return request;
  return sendMessage(peer, dataHeader<Header>(tag, bytes), data, request);
}

void OfiTransport::sendControl(int peer, ControlKind kind, uint64_t round,
                               const std::string& text) {
  postControl(peer, kind, round, text);
}

RequestPtr OfiTransport::postControl(int peer, ControlKind kind, uint64_t round,
                                     const std::string& text) {
  Header header;
  header.kind = Kind::kControl;
  header.control = WireControl::make(kind, round);
  header.bytes = std::min(text.size(), kEagerBytes);  // a longer status text is cut
  if (trace_.on()) trace_.control();
  // Best effort: the request is only watched by abort(); a failure shows up as a failed peer.
  auto request = std::make_shared<Request>(peer, MessageTag{}, header.bytes, /*isSend=*/true);
  return sendMessage(peer, header, text.data(), request);
}

void OfiTransport::receiveData(const RequestPtr& request, uint8_t* data, int peer,
                               uint64_t dataId) {
  Op* op = Op::make(Op::Type::kDataRecv, peer, request);
  op->data = data;
  op->bytes = request->bytes();
  op->tag = dataTag(peer, dataId);
  try {
    op->desc = localDesc(op, data, op->bytes);
  } catch (const Error& e) {
    delete op;
    request->failLocked(e);
    completed_.notify_all();
    discardData(peer, dataId, request->bytes());
    return;
  }
  post(op);
}

void OfiTransport::discardData(int peer, uint64_t dataId, uint64_t bytes) {
  // Received whole into a scratch buffer, so that the sender's request completes instead of
  // waiting for a receiver forever (a truncating receive does not end ofi_rxm's rendezvous).
  // Only mismatched messages get here: the run is failing anyway.
  if (bytes > kMaxDiscardBytes) {
    XCCL_WARN("ofi", "left rank ", peer, "'s mismatched ", bytes, "-byte message untaken (over ",
              kMaxDiscardBytes, " bytes): its send completes only when it fails");
    return;
  }
  Op* op = new Op{};
  op->type = Op::Type::kDiscard;
  op->peer = peer;
  op->tag = dataTag(peer, dataId);
  try {
    op->buffer.resize(bytes);
    op->data = op->buffer.data();
    op->bytes = bytes;
    op->desc = localDesc(op, op->data, bytes);
  } catch (const std::exception& e) {
    XCCL_WARN("ofi", "could not take rank ", peer, "'s mismatched message: ", e.what());
    delete op;
    return;
  }
  post(op);
}

// Progress thread: a data header in stream order.
void OfiTransport::matchData(const Header& header, const uint8_t* payload) {
  const int peer = header.source;
  const MessageTag tag = header.tag.decode();
  const bool inlined = header.inlineBytes == header.bytes;
  std::lock_guard<std::mutex> guard(mutex_);
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    const RequestPtr& request = it->request;
    if (!(request->peer() == kAnySource || request->peer() == peer)) continue;
    const bool differ = collectivesDiffer(request->tag(), tag);
    if (!differ && !(request->tag() == tag)) continue;
    RequestPtr matched = request;
    uint8_t* data = it->data;
    posted_.erase(it);
    if (differ || matched->bytes() != header.bytes) {
      matched->failLocked(differ ? collectiveMismatch(peer, matched->tag(), tag)
                                 : sizeMismatchError(peer, tag, header.bytes, matched->bytes()));
      if (!inlined) discardData(peer, header.dataId, header.bytes);
    } else if (inlined) {
      if (header.bytes > 0) std::memcpy(data, payload, header.bytes);
      matched->completeLocked(peer);
    } else {
      receiveData(matched, data, peer, header.dataId);
    }
    if (trace_.on()) trace_.notified();
    completed_.notify_all();
    return;
  }
  Unexpected entry{peer, tag, header.bytes, header.dataId, {}};
  if (inlined) entry.payload.assign(payload, payload + header.bytes);
  unexpected_.push_back(std::move(entry));
}

RequestPtr OfiTransport::irecv(int peer, MessageTag tag, void* data, size_t bytes,
                               Completion onDone) {
  XCCL_CHECK_ARG(peer == kAnySource || (peer >= 0 && peer < size_ && peer != rank_),
                 "cannot receive from rank ", peer, " on rank ", rank_, " of ", size_);
  auto request = std::make_shared<Request>(peer, tag, bytes, /*isSend=*/false, std::move(onDone));
  std::lock_guard<std::mutex> guard(mutex_);
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    if (!(peer == kAnySource || peer == it->peer)) continue;
    const bool differ = collectivesDiffer(tag, it->tag);
    if (!differ && !(it->tag == tag)) continue;
    Unexpected entry = std::move(*it);
    unexpected_.erase(it);
    const bool inlined = entry.payload.size() == entry.bytes;
    if (differ || entry.bytes != bytes) {
      if (!inlined) discardData(entry.peer, entry.dataId, entry.bytes);
      return failedRequest(request, differ
                                        ? collectiveMismatch(entry.peer, tag, entry.tag)
                                        : sizeMismatchError(entry.peer, tag, entry.bytes, bytes));
    }
    if (inlined) {
      if (bytes > 0) std::memcpy(data, entry.payload.data(), bytes);
      request->completeLocked(entry.peer);
    } else {
      receiveData(request, static_cast<uint8_t*>(data), entry.peer, entry.dataId);
    }
    return request;
  }
  if (const Error* refusal = health_.refusalLocked(peer, tag.space)) {
    return failedRequest(request, *refusal);
  }
  posted_.push_back({request, static_cast<uint8_t*>(data)});
  return request;
}

void OfiTransport::wait(const std::vector<RequestPtr>& requests, Deadline deadline,
                        const std::string& what) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!trace_.on()) {
    waitForRequests(lock, completed_, requests, deadline, what);
    return;
  }
  trace_.callerSeen();
  const bool slept =
      !std::all_of(requests.begin(), requests.end(), [](const RequestPtr& r) { return r->done(); });
  rusage before{}, after{};
  getrusage(RUSAGE_THREAD, &before);
  const uint64_t start = Trace::nowNs();
  auto account = [&] {
    const uint64_t end = Trace::nowNs();
    getrusage(RUSAGE_THREAD, &after);
    trace_.waited(slept, after.ru_nvcsw - before.ru_nvcsw, after.ru_nivcsw - before.ru_nivcsw);
    if (!slept) return;
    trace_.add(Trace::kWaitAsleep, end - start);
    const uint64_t notified = trace_.lastNotifyNs();
    if (notified > start && notified < end) trace_.add(Trace::kHandOff, end - notified);
  };
  try {
    waitForRequests(lock, completed_, requests, deadline, what);
  } catch (...) {
    account();
    throw;
  }
  account();
}

void OfiTransport::failPeerLocked(const PeerLoss& loss, const Error& error) {
  {
    std::lock_guard<std::mutex> ops(opsMutex_);
    for (Op* op : live_) {
      if (op->peer != loss.peer || op->type == Op::Type::kHeaderRecv) continue;
      if (op->request) op->request->failLocked(error);
      // The user's buffer must not be written after its request failed. Under opsMutex_, so
      // the op cannot be finished (freed) meanwhile.
      if (op->type == Op::Type::kDataRecv) fi_cancel(&fabric_->ep()->fid, &op->context);
    }
  }
  for (auto it = posted_.begin(); it != posted_.end();) {
    if (loss.covers(it->request->peer(), it->request->tag().space)) {
      it->request->failLocked(error);
      it = posted_.erase(it);
    } else {
      ++it;
    }
  }
}

void OfiTransport::failRequestsLocked(const Error& error) {
  for (auto& p : posted_) p.request->failLocked(error);
  posted_.clear();
  std::lock_guard<std::mutex> ops(opsMutex_);
  for (Op* op : live_) {
    if (op->request) op->request->failLocked(error);
  }
}

void OfiTransport::abort(const std::string& reason) {
  std::vector<int> tell;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (health_.abortedLocked()) return;
    for (int peer = 0; peer < size_; ++peer) {
      if (peer != rank_ && !health_.peerErrorLocked(peer)) tell.push_back(peer);
    }
  }
  XCCL_INFO("ofi", "aborting: ", reason);
  // Tell the peers first and give the messages a moment to leave (the refusal below would fail
  // them, and a transport destroyed right after abort() would drop them).
  std::vector<RequestPtr> told;
  for (int peer : tell) told.push_back(postControl(peer, ControlKind::kAbort, 0, reason));
  std::unique_lock<std::mutex> lock(mutex_);
  completed_.wait_until(lock, Clock::now() + kAbortNoticeTime, [&] {
    for (const auto& r : told) {
      if (!r->done()) return false;
    }
    return true;
  });
  if (!health_.abortLocked(reason)) return;
  failEverythingLocked(*health_.abortedLocked());
  std::lock_guard<std::mutex> ops(opsMutex_);
  for (Op* op : live_) {
    // Received bytes must not land in buffers whose requests have failed.
    if (op->type == Op::Type::kDataRecv) fi_cancel(&fabric_->ep()->fid, &op->context);
  }
}

std::vector<std::string> OfiTransport::queryStatus(Deadline deadline) {
  return status_.query(deadline, health_, [&](int peer, uint64_t round) {
    sendControl(peer, ControlKind::kStatusQuery, round, "");
  });
}

}  // namespace xccl::net::ofi
