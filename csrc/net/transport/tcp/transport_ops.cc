// TcpTransport's caller-facing operations, its control frames and the failure steps
// TransportBase asks of it, each a step per part (the parts are named in transport.h).
#include <sys/epoll.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "common/logging.h"
#include "common/wait_slice.h"
#include "net/transport/tcp/transport.h"

namespace xccl::net::tcp {
RequestPtr TcpTransport::isend(int peer, MessageTag tag, const void* data, size_t bytes,
                               Completion onDone) {
  bool refusedNow = false;
  RequestPtr request = newSend(peer, tag, bytes, std::move(onDone), &refusedNow);
  if (refusedNow) return request;
  Peer& p = *peers_[peer];
  std::vector<RequestPtr> completed;
  bool refused = false;
  {
    std::lock_guard<std::mutex> guard(p.sendMutex);
    refused = p.failed;
    if (!refused) {
      FrameHeader header;
      header.tag = WireTag::encode(tag);
      sender_.enqueueLocked(p, request, header, data, bytes, &completed);
    }
  }
  if (refused) {
    // Lock order: mutex_ is never taken under a sendMutex (failAll takes them the other way).
    std::lock_guard<std::mutex> lock(mutex_);
    const Error* refusal = health_.refusalLocked(peer, tag.space);
    return failedRequest(request, refusal ? *refusal
                                          : Error(ErrorKind::kPeerFailure,
                                                  detail::concat("rank ", peer, " has failed")));
  }
  completeAll(completed);
  return request;
}

RequestPtr TcpTransport::irecv(int peer, MessageTag tag, void* data, size_t bytes,
                               Completion onDone) {
  XCCL_CHECK_ARG(peer == kAnySource || (peer >= 0 && peer < size_ && peer != rank_),
                 "cannot receive from rank ", peer, " on rank ", rank_, " of ", size_);
  auto request = std::make_shared<Request>(peer, tag, bytes, /*isSend=*/false, std::move(onDone));
  receiver_.receive(request, static_cast<uint8_t*>(data), health_);
  return request;
}

void TcpTransport::wait(const std::vector<RequestPtr>& requests, Deadline deadline,
                        const std::string& what) {
  auto allDone = [&] {
    for (const auto& r : requests) {
      if (!r->done()) return false;
    }
    return true;
  };
  {
    std::unique_lock<std::mutex> lock(mutex_);
    std::optional<wait_slice::WhileWaiting> slice;  // only for a wait that will sleep
    if (!allDone()) slice.emplace();
    if (!completed_.wait_until(lock, deadline, allDone)) {
      lock.unlock();
      // A peer with no link left is the reason, not a slow rank: say so, naming its links.
      for (const auto& r : requests) {
        if (r->done() || r->peer() == kAnySource) continue;
        Peer& p = *peers_[r->peer()];
        std::lock_guard<std::mutex> guard(p.sendMutex);
        if (p.upLinks() == 0 && !p.failed) {
          XCCL_THROW(ErrorKind::kPeerFailure, what, " failed: no link to rank ", r->peer(),
                     " came back in time: ", p.describeLinks());
        }
      }
      XCCL_THROW(ErrorKind::kTimeout, describeTimeout(requests, what));
    }
  }
  for (const auto& r : requests) {
    try {
      r->rethrowIfFailed();
    } catch (const Error& e) {
      throw Error(e.kind(), what + " failed: " + e.what());
    }
  }
}

std::vector<RequestPtr> TcpTransport::dropPeer(int peer) {
  Peer& p = *peers_[peer];
  std::vector<RequestPtr> sends;
  {
    std::lock_guard<std::mutex> guard(p.sendMutex);
    p.failed = true;
    progress_.closeLinksLocked(p);
    sends = sender_.takeSendsLocked(p);
  }
  // Its links are closed: no chunk is read into registered memory any more.
  receiver_.abandonSlots(peer);
  return sends;
}

void TcpTransport::failPeerLocked(const PeerLoss& loss, const Error& error) {
  writes_.failWritesLocked(loss.peer, error);
  receiver_.failPeerLocked(loss.peer, error, [&](int from, const MessageTag& tag) {
    return loss.covers(from, tag.space);
  });
}

void TcpTransport::failRequestsLocked(const Error& error) {
  receiver_.failAllLocked(error);
  for (auto& peer : peers_) {
    if (!peer) continue;
    std::lock_guard<std::mutex> guard(peer->sendMutex);
    sender_.failSendsLocked(*peer, error);
  }
  writes_.failWritesLocked(-1, error);
  // Called once the progress thread stopped (abort) or is leaving (failAll): it reads into no
  // registered memory any more, so deregistrations need not wait.
  writes_.forgetLandingLocked();
}

void TcpTransport::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lifecycle(lifecycleMutex_);
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!health_.abortLocked(reason)) return;
  }
  XCCL_INFO("tcp", "aborting: ", reason);
  // Stop the threads first so nothing below races with them.
  stopThreads();
  const FrameHeader header = controlFrame(ControlKind::kAbort, 0, reason.size());
  for (auto& peer : peers_) {
    if (!peer) continue;
    std::lock_guard<std::mutex> guard(peer->sendMutex);
    peer->failed = true;
    for (auto& link : peer->links) {
      if (!link->up) continue;
      // Best effort and briefly bounded, on every link the peer may read first, after the rest
      // of a half-written frame (its bytes are still valid: its send has not completed).
      const auto deadline = Clock::now() + std::chrono::milliseconds(200);
      if (finishFrame(*link, deadline)) {
        try {
          link->socket.sendAll(&header, sizeof(header), deadline);
          link->socket.sendAll(reason.data(), header.length, deadline);
        } catch (const Error&) {
        }
      }
      ::shutdown(link->socket.fd(), SHUT_RDWR);
    }
  }
  std::lock_guard<std::mutex> guard(mutex_);
  failEverythingLocked(*health_.abortedLocked());
}

void TcpTransport::sendControl(int peer, ControlKind kind, uint64_t round,
                               const std::string& payload) {
  const FrameHeader header = controlFrame(kind, round, payload.size());
  Peer& p = *peers_[peer];
  std::vector<RequestPtr> completed;
  {
    std::lock_guard<std::mutex> guard(p.sendMutex);
    const int index = pickLink(p);
    if (p.failed || index < 0) return;  // best effort: the peer's failure is reported elsewhere
    p.links[index]->control.push_back(
        {header, std::make_shared<const std::string>(payload.substr(0, header.length))});
    flushLink(p, *p.links[index], epollFd_, &completed);
  }
  completeAll(completed);
}

std::unique_ptr<Registration> TcpTransport::registerMemory(void* data, size_t bytes) {
  return writes_.registerMemory(data, bytes);
}

RequestPtr TcpTransport::iwrite(int peer, const void* data, size_t bytes, const RemoteRegion& dst,
                                uint64_t dstOffset, uint64_t signal, Completion onDone) {
  return writes_.iwrite(peer, data, bytes, dst, dstOffset, signal, std::move(onDone));
}

std::vector<std::string> TcpTransport::queryStatus(Deadline deadline) {
  return status_.query(deadline, health_, [&](int peer, uint64_t round) {
    sendControl(peer, ControlKind::kStatusQuery, round, "");
  });
}

}  // namespace xccl::net::tcp
