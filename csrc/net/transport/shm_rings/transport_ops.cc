// ShmTransport's caller-facing operations, one-sided writes and failure handling (creation and
// the progress thread are in transport.cc).
#include <algorithm>
#include <cstring>
#include <exception>

#include "common/logging.h"
#include "net/transport/shm_rings/transport.h"

namespace xccl::net::shm_rings {
// Deregisters under the transport's mutex, so a write frame arriving afterwards is refused
// instead of landing in freed memory, then waits for a write already being copied into it (the
// progress thread copies out of the ring without the lock) to finish or its peer to fail.
class ShmTransport::ShmRegistration final : public Registration {
 public:
  ShmRegistration(ShmTransport& owner, RemoteRegion remote) : owner_(owner), remote_(remote) {}
  ~ShmRegistration() override {
    std::unique_lock<std::mutex> lock(owner_.mutex_);
    owner_.regions_.removeLocked(remote_.key);
    owner_.completed_.wait(lock, [&] {
      return owner_.stop_.load() || std::find(owner_.landing_.begin(), owner_.landing_.end(),
                                              remote_.key) == owner_.landing_.end();
    });
  }
  RemoteRegion remote() const override { return remote_; }

 private:
  ShmTransport& owner_;
  const RemoteRegion remote_;
};

void ShmTransport::sendFrame(int peer, const FrameHeader& header, const void* payload,
                             RequestPtr request) {
  std::vector<RequestPtr> completed;
  try {
    link(peer).enqueue(header, payload, request, &completed);
  } catch (const Error& e) {
    if (!request) return;
    std::lock_guard<std::mutex> guard(mutex_);
    const Error* refusal = health_.refusalLocked(peer, header.tag.space);
    request->failLocked(refusal ? *refusal : e);
    completed_.notify_all();
    return;
  }
  // A frame that did not fit is finished by the progress thread, woken by the peer's reads.
  completeAll(completed);
}

RequestPtr ShmTransport::isend(int peer, MessageTag tag, const void* data, size_t bytes,
                               Completion onDone) {
  bool refused = false;
  RequestPtr request = newSend(peer, tag, bytes, std::move(onDone), &refused);
  if (refused) return request;
  sendFrame(peer, dataHeader<FrameHeader>(tag, bytes), data, request);
  return request;
}

RequestPtr ShmTransport::irecv(int peer, MessageTag tag, void* data, size_t bytes,
                               Completion onDone) {
  XCCL_CHECK_ARG(peer == kAnySource || reaches(peer), "rank ", rank_, " cannot receive from rank ",
                 peer, " over shared memory (not a rank of this host)");
  auto request = std::make_shared<Request>(peer, tag, bytes, /*isSend=*/false, std::move(onDone));
  receives_.receive(request, static_cast<uint8_t*>(data), health_, mutex_, completed_);
  return request;
}

std::unique_ptr<Registration> ShmTransport::registerMemory(void* data, size_t bytes) {
  std::lock_guard<std::mutex> guard(mutex_);
  return std::make_unique<ShmRegistration>(*this, regions_.addLocked(data, bytes));
}

RequestPtr ShmTransport::iwrite(int peer, const void* data, size_t bytes, const RemoteRegion& dst,
                                uint64_t dstOffset, uint64_t signal, Completion onDone) {
  XCCL_CHECK_ARG(reaches(peer), "rank ", rank_, " cannot write to rank ", peer,
                 " over shared memory (not a rank of this host)");
  const MessageTag tag{TagSpace::kPointToPoint, 0, signal, 0};
  auto request = std::make_shared<Request>(peer, tag, bytes, /*isSend=*/true, std::move(onDone));
  FrameHeader header;
  header.type = FrameType::kWrite;
  header.tag = WireTag::encode(tag);
  header.bytes = bytes;
  header.key = dst.key;
  header.offset = dstOffset;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (dstOffset > dst.bytes || bytes > dst.bytes - dstOffset) {
      return failedRequest(request,
                           Error(ErrorKind::kInvalidArgument,
                                 detail::concat("a one-sided write of ", bytes, " bytes at offset ",
                                                dstOffset, " does not fit rank ", peer,
                                                "'s region of ", dst.bytes, " bytes")));
    }
    if (const Error* refusal = health_.refusalLocked(peer, tag.space)) {
      return failedRequest(request, *refusal);
    }
    header.id = nextWriteId_++;
    writes_[header.id] = request;
  }
  // The write completes on the target's acknowledgement, not when the bytes are in the ring:
  // the target may refuse it, and the signal means the bytes are visible there.
  sendFrame(peer, header, data, nullptr);
  return request;
}

void ShmTransport::checkPeer(int peer, bool sending) const {
  XCCL_CHECK_ARG(reaches(peer), "rank ", rank_,
                 sending ? " cannot send to rank " : " cannot wait for writes from rank ", peer,
                 " over shared memory (not a rank of this host)");
}

std::vector<RequestPtr> ShmTransport::dropPeer(int peer) { return links_[peer]->closeSends(); }

void ShmTransport::failPeerLocked(const PeerLoss& loss, const Error& error) {
  const int peer = loss.peer;
  landing_[peer] = 0;  // the link is dropped: nothing more is copied from this peer
  Inflight slot = std::move(inflight_[peer]);
  inflight_[peer] = Inflight{};
  if (slot.request) slot.request->failLocked(error);
  if (slot.unexpected && slot.unexpected->waiter) slot.unexpected->waiter->failLocked(error);
  receives_.failLocked(error, [&](int from, const MessageTag& tag) {
    return loss.covers(from, tag.space);
  });
  for (auto it = writes_.begin(); it != writes_.end();) {
    if (it->second->peer() == peer) {
      it->second->failLocked(error);
      it = writes_.erase(it);
    } else {
      ++it;
    }
  }
}

void ShmTransport::failRequestsLocked(const Error& error) {
  receives_.failWaitingLocked(error);
  for (auto& slot : inflight_) {
    if (slot.request) slot.request->failLocked(error);
    if (slot.unexpected && slot.unexpected->waiter) slot.unexpected->waiter->failLocked(error);
    slot = Inflight{};
  }
  for (auto& w : writes_) w.second->failLocked(error);
  writes_.clear();
}

void ShmTransport::failEverything(const std::string& what) noexcept {
  try {
    std::string text = what;
    try {
      throw;
    } catch (const std::exception& e) {
      text += detail::concat(": ", e.what());
    } catch (...) {
    }
    std::lock_guard<std::mutex> guard(mutex_);
    failEverythingLocked(Error(ErrorKind::kInternal, text));
  } catch (...) {
    // Out of memory even for the message: the waiters' deadlines still bound them.
  }
}

void ShmTransport::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!health_.abortLocked(reason)) return;
  }
  XCCL_INFO("shm", "aborting: ", reason);
  // The reason first, then the flag (release): a peer that sees the flag reads all of it. The
  // flag reaches peers even when every ring to them is full.
  Mailbox& mine = boxes_->box(localOf_[rank_]);
  std::strncpy(mine.reason, reason.c_str(), sizeof(mine.reason) - 1);
  mine.aborted.store(1, std::memory_order_release);
  for (int peer = 0; peer < size_; ++peer) {
    if (links_[peer]) boxes_->wake(localOf_[peer]);
  }
  // Stop the progress thread so nothing below races with it.
  stop_.store(true);
  if (progressThread_.joinable()) {
    boxes_->wake(localOf_[rank_]);
    progressThread_.join();
  }
  std::vector<RequestPtr> sends;
  for (auto& conn : links_) {
    if (!conn) continue;
    for (auto& r : conn->closeSends()) sends.push_back(std::move(r));
  }
  std::lock_guard<std::mutex> guard(mutex_);
  for (auto& r : sends) r->failLocked(*health_.abortedLocked());
  failEverythingLocked(*health_.abortedLocked());
}

void ShmTransport::sendControl(int peer, ControlKind kind, uint64_t round,
                               const std::string& text) {
  FrameHeader header;
  header.type = FrameType::kControl;
  header.control = WireControl::make(kind, round);
  sendText(peer, header, text.substr(0, kMaxControlBytes));
}

void ShmTransport::sendText(int peer, FrameHeader header, const std::string& text) {
  // The text must outlive the asynchronous write: the request's completion keeps it.
  auto kept = std::make_shared<std::string>(text);
  header.bytes = kept->size();
  auto request = std::make_shared<Request>(peer, MessageTag{}, kept->size(), /*isSend=*/true,
                                           [kept](const Request&) {});
  sendFrame(peer, header, kept->data(), request);
}

std::vector<std::string> ShmTransport::queryStatus(Deadline deadline) {
  return status_.query(
      deadline, health_,
      [&](int peer, uint64_t round) { sendControl(peer, ControlKind::kStatusQuery, round, ""); },
      [&](int peer) { return reaches(peer); });
}

}  // namespace xccl::net::shm_rings
