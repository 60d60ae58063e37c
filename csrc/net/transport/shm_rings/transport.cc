#include "net/transport/shm_rings/transport.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>

#include "common/logging.h"
#include "common/thread_affinity.h"
#include "common/wait_slice.h"

namespace xccl::net::shm_rings {
namespace {

// How long the progress thread sleeps at most when idle: bounds how late a dead peer is noticed
// (its doorbell never rings); costs one wake-up per slice, nothing measurable.
constexpr auto kSlice = std::chrono::milliseconds(20);

// A descriptor that becomes readable when `pid` exits (zombie included); -1 for this process
// itself (ranks as threads) or where pidfd_open is missing (Linux < 5.3: liveness unwatched).
int watchProcess(int pid) {
  if (pid <= 0 || pid == ::getpid()) return -1;
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  return -1;
#endif
}

bool exited(int pidfd) {
  if (pidfd < 0) return false;
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

Error frameFailure(int peer, const std::string& what) {
  return Error(ErrorKind::kPeerFailure,
               detail::concat("handling what rank ", peer,
                              " sent over shared memory failed (a corrupt frame?): ", what));
}

}  // namespace

std::unique_ptr<ShmTransport> ShmTransport::create(Store& store, int rank, int size,
                                                   const std::vector<int>& members,
                                                   const TransportOptions& options,
                                                   std::string* why) {
  auto self = std::find(members.begin(), members.end(), rank);
  XCCL_CHECK_ARG(self != members.end(), "rank ", rank, " is not among the shm members");
  const int local = static_cast<int>(self - members.begin());
  auto boxes = Mailboxes::create(store, options.storePrefix, local,
                                 static_cast<int>(members.size()), options.timeout, why);
  if (!boxes) return nullptr;
  std::unique_ptr<ShmTransport> t(new ShmTransport(rank, size, members, std::move(boxes)));
  t->progressThread_ = std::thread([raw = t.get(), cpus = options.progressCpus] {
    affinity::pinProgressThread(cpus, "shm");  // never throws; unpinned when it cannot pin
    wait_slice::keepShort();
    raw->progressLoop();
  });
  return t;
}

ShmTransport::ShmTransport(int rank, int size, const std::vector<int>& members,
                           std::unique_ptr<Mailboxes> boxes)
    : TransportBase(rank, size),
      localOf_(size, -1),
      boxes_(std::move(boxes)),
      links_(size),
      pidfds_(size, -1),
      inflight_(size),
      landing_(size, 0) {
  for (size_t i = 0; i < members.size(); ++i) localOf_[members[i]] = static_cast<int>(i);
  const int me = localOf_[rank];
  for (int peer : members) {
    if (peer == rank) continue;
    const int other = localOf_[peer];
    links_[peer] = std::make_unique<Link>(peer, boxes_->ring(me, other), boxes_->ring(other, me),
                                          boxes_->box(other));
    pidfds_[peer] = watchProcess(boxes_->box(other).pid.load(std::memory_order_acquire));
  }
}

ShmTransport::~ShmTransport() {
  stop_.store(true);
  if (progressThread_.joinable()) {
    boxes_->wake(localOf_[rank_]);
    progressThread_.join();
  }
  for (int fd : pidfds_) {
    if (fd >= 0) ::close(fd);
  }
}

bool ShmTransport::reaches(int peer) const {
  return peer >= 0 && peer < size_ && peer != rank_ && localOf_[peer] >= 0;
}

void ShmTransport::progressLoop() {
  const int me = localOf_[rank_];
  std::vector<RequestPtr> completed;
  auto lastCheck = Clock::now();
  while (!stop_.load()) {
    // Loaded before the pass: anything that arrives during it changes the word, so the sleep
    // below returns at once instead of missing it.
    const uint32_t seen = boxes_->box(me).doorbell.load(std::memory_order_seq_cst);
    bool moved = false;
    // pump() contains each peer's failures; what is left (memory exhausted while failing one)
    // must not end the process either: every waiter gets the reason.
    try {
      moved = pump(&completed);
      completeAll(completed);
      completed.clear();
      if (Clock::now() - lastCheck >= kSlice) {
        checkPeers();
        lastCheck = Clock::now();
      }
    } catch (...) {
      completed.clear();
      failEverything("the shared-memory progress thread failed");
    }
    if (!moved && !stop_.load()) boxes_->sleep(me, seen, kSlice);
  }
}

bool ShmTransport::pump(std::vector<RequestPtr>* completed) {
  bool moved = false;
  for (int peer = 0; peer < size_; ++peer) {
    Link* conn = links_[peer].get();
    if (conn == nullptr) continue;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (health_.peerErrorLocked(peer)) continue;
    }
    // Anything a peer's frames make fail (a corrupt ring, an allocation for an absurd size)
    // fails that peer alone; its waiters rethrow the reason, the other peers keep going.
    try {
      moved |= conn->flush(completed);
      moved |= conn->readAvailable(*this);
    } catch (const Error& e) {
      failPeer(peer, e, false);
    } catch (const std::exception& e) {
      failPeer(peer, frameFailure(peer, e.what()), false);
    } catch (...) {
      failPeer(peer, frameFailure(peer, "an unknown exception"), false);
    }
  }
  return moved;
}

// A peer that aborted wrote its reason first; one whose process exited is lost once its ring
// is drained (it may have sent its last messages and exited cleanly).
void ShmTransport::checkPeers() {
  for (int peer = 0; peer < size_; ++peer) {
    if (!links_[peer]) continue;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (health_.peerErrorLocked(peer)) continue;
    }
    Mailbox& box = boxes_->box(localOf_[peer]);
    if (box.aborted.load(std::memory_order_acquire) != 0) {
      // An abort comes through the mailbox, not the ring (which may be full); it is handled as
      // every engine's abort message is.
      onControl(peer, ControlKind::kAbort, 0,
                std::string(box.reason, strnlen(box.reason, sizeof(box.reason))));
    } else if (exited(pidfds_[peer]) && links_[peer]->readIdle()) {
      failPeer(peer,
               Error(ErrorKind::kPeerFailure,
                     detail::concat("rank ", peer,
                                    " exited (its process ended or was killed) while connected "
                                    "over shared memory")),
               false);
    }
  }
}

FrameTarget ShmTransport::onHeader(int peer, const FrameHeader& header) {
  Inflight& slot = inflight_[peer];
  slot = Inflight{};
  switch (header.type) {
    case FrameType::kData: {
      std::lock_guard<std::mutex> guard(mutex_);
      return matchDataLocked(peer, header.tag.decode(), header.bytes, slot);
    }
    case FrameType::kWrite: {
      std::lock_guard<std::mutex> guard(mutex_);
      std::string why;
      uint8_t* at = regions_.findLocked(header.key, header.offset, header.bytes, &why);
      if (at != nullptr && header.bytes > 0) landing_[peer] = header.key;
      if (at == nullptr) {
        slot.refused = true;
        slot.control = detail::concat("rank ", rank_, " refused a one-sided write of ",
                                      header.bytes, " bytes at offset ", header.offset, ": ", why);
      }
      return {at};
    }
    case FrameType::kControl:
    case FrameType::kWriteAck:
      // Short texts: the link's validateHeader bounded them.
      slot.control.resize(header.bytes);
      return {reinterpret_cast<uint8_t*>(slot.control.data())};
  }
  XCCL_THROW(ErrorKind::kPeerFailure, "rank ", peer, " sent an unknown frame type ",
             static_cast<uint32_t>(header.type));
}

FrameTarget ShmTransport::matchDataLocked(int peer, const MessageTag& tag, uint64_t bytes,
                                          Inflight& slot) {
  PostedReceive matched;
  switch (receives_.matchPostedLocked(peer, tag, bytes, &matched)) {
    case ReceiveQueues::Match::kFailed: completed_.notify_all(); return {};  // discarded
    case ReceiveQueues::Match::kMatched:
      slot.request = std::move(matched.request);
      return {matched.data};
    case ReceiveQueues::Match::kNone: break;
  }
  slot.unexpected = receives_.addUnexpectedLocked(peer, tag, bytes);
  return {slot.unexpected->data.data()};
}

void ShmTransport::onPayload(int peer, const FrameHeader& header, const FrameTarget&) {
  Inflight slot = std::move(inflight_[peer]);
  inflight_[peer] = Inflight{};
  switch (header.type) {
    case FrameType::kData: break;
    case FrameType::kWrite: onWriteDone(peer, header, slot); return;
    case FrameType::kControl:
      onControl(peer, header.control.kind, header.control.round, slot.control);
      return;
    case FrameType::kWriteAck: {
      std::lock_guard<std::mutex> guard(mutex_);
      auto it = writes_.find(header.id);
      if (it == writes_.end()) return;  // failed meanwhile
      if (header.refused == 0) {
        it->second->completeLocked(peer);
      } else {
        it->second->failLocked(Error(ErrorKind::kInvalidArgument, slot.control));
      }
      writes_.erase(it);
      completed_.notify_all();
      return;
    }
  }
  if (slot.request) {
    std::lock_guard<std::mutex> guard(mutex_);
    slot.request->completeLocked(peer);
    completed_.notify_all();
    return;
  }
  if (!slot.unexpected) return;  // discarded payload
  RequestPtr waiter;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    waiter = receives_.arrivedLocked(slot.unexpected);
  }
  if (waiter) {
    ReceiveQueues::deliver(slot.unexpected, waiter, slot.unexpected->waiterData, mutex_,
                           completed_);
  }
}

// The bytes are in place (the copy out of the ring happened on this thread): the signal
// completes the oldest wait for it or is counted, then the writer learns its write landed.
void ShmTransport::onWriteDone(int peer, const FrameHeader& header, Inflight& slot) {
  if (!slot.refused) {
    std::lock_guard<std::mutex> guard(mutex_);
    landing_[peer] = 0;
    // Always: a deregistration may be waiting for this copy to end (ShmRegistration).
    completed_.notify_all();
    signals_.arrivedLocked(peer, header.tag.seq);  // the write's signal
  } else {
    XCCL_WARN("shm", slot.control);
  }
  FrameHeader ack;
  ack.type = FrameType::kWriteAck;
  ack.id = header.id;
  ack.refused = slot.refused ? 1 : 0;
  sendText(peer, ack, slot.control);
}

}  // namespace xccl::net::shm_rings
