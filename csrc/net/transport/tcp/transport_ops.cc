// TcpTransport's caller-facing operations and failure handling (the mesh and the progress
// thread are in transport.cc).
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
      header.space = static_cast<uint16_t>(tag.space);
      header.step = tag.step;
      header.op = tag.op;
      header.tagSeq = tag.seq;
      enqueueLocked(p, request, header, data, bytes, &completed);
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

void TcpTransport::enqueueLocked(Peer& p, const RequestPtr& request, FrameHeader header,
                                 const void* data, size_t bytes, std::vector<RequestPtr>* completed,
                                 bool flush) {
  {
    header.message = p.nextMessage++;
    header.total = bytes;
    const auto* base = static_cast<const uint8_t*>(data);
    int slab = -1;
    if (bytes <= kInlineBytes) {
      // Small: copied, so the send completes once written and the copy serves a replay.
      if (p.freeSlabs.empty()) {
        p.slabs.push_back(std::make_unique<uint8_t[]>(kInlineBytes));
        p.freeSlabs.push_back(static_cast<int>(p.slabs.size()) - 1);
      }
      slab = p.freeSlabs.back();
      p.freeSlabs.pop_back();
      if (bytes > 0) std::memcpy(p.slabs[slab].get(), data, bytes);
      base = p.slabs[slab].get();
    }
    size_t offset = 0;
    do {
      header.offset = offset;
      header.length = static_cast<uint32_t>(std::min(kChunkBytes, bytes - offset));
      header.seq = p.nextSeq++;
      Chunk chunk;
      chunk.header = header;
      chunk.payload = base + offset;
      chunk.slab = slab;
      p.retained.push_back(std::move(chunk));
      const int link = pickLink(p);
      if (link >= 0) assignChunk(p, header.seq, link);
      offset += header.length;
    } while (offset < bytes);
    if (slab >= 0) {
      p.retained.back().onWritten = request;
    } else {
      p.sent.push_back({request, p.nextSeq});  // complete once acknowledged
    }
    if (flush) flushPeer(p, completed);  // the cheap path: as much as the sockets take now
  }
}

RequestPtr TcpTransport::irecv(int peer, MessageTag tag, void* data, size_t bytes,
                               Completion onDone) {
  XCCL_CHECK_ARG(peer == kAnySource || (peer >= 0 && peer < size_ && peer != rank_),
                 "cannot receive from rank ", peer, " on rank ", rank_, " of ", size_);
  auto request = std::make_shared<Request>(peer, tag, bytes, /*isSend=*/false, std::move(onDone));
  receives_.receive(request, static_cast<uint8_t*>(data), health_, mutex_, completed_);
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
    for (auto& link : p.links) {
      if (link->up) {
        ::epoll_ctl(epollFd_, EPOLL_CTL_DEL, link->socket.fd(), nullptr);
        link->socket.close();
      }
      link->up = false;
      link->writing = false;
      link->queue.clear();
      link->control.clear();
    }
    for (auto& chunk : p.retained) {
      if (chunk.onWritten) sends.push_back(std::move(chunk.onWritten));
    }
    for (auto& message : p.sent) sends.push_back(std::move(message.request));
    p.retainedBase += p.retained.size();
    p.retained.clear();
    p.sent.clear();
  }
  // Its links are closed: no chunk is read into registered memory any more.
  for (auto& slot : receiving_[peer].slots) unpin(slot);
  return sends;
}

void TcpTransport::failPeerLocked(const PeerLoss& loss, const Error& error) {
  failWritesLocked(loss.peer, error);
  Receiving& r = receiving_[loss.peer];
  for (auto& message : r.incoming) {
    if (message.request) message.request->failLocked(error);
  }
  r.clear();
  receives_.failLocked(error, [&](int from, const MessageTag& tag) {
    return loss.covers(from, tag.space);
  });
}

void TcpTransport::failRequestsLocked(const Error& error) {
  receives_.failLocked(error, [](int, const MessageTag&) { return true; });
  for (auto& r : receiving_) {
    for (auto& message : r.incoming) {
      if (message.request) message.request->failLocked(error);
    }
    r.incoming.clear();
  }
  for (auto& peer : peers_) {
    if (!peer) continue;
    std::lock_guard<std::mutex> guard(peer->sendMutex);
    for (auto& chunk : peer->retained) {
      if (chunk.onWritten) chunk.onWritten->failLocked(error);
    }
    for (auto& message : peer->sent) message.request->failLocked(error);
    peer->sent.clear();
  }
  failWritesLocked(-1, error);
  // Called once the progress thread stopped (abort) or is leaving (failAll): it reads into no
  // registered memory any more, so deregistrations need not wait.
  landing_.clear();
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
  FrameHeader header;
  header.type = FrameType::kAbort;
  header.length = static_cast<uint32_t>(std::min<size_t>(reason.size(), kMaxControlBytes));
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

void TcpTransport::sendControl(int peer, FrameType type, uint64_t seq, const std::string& payload) {
  FrameHeader header;
  header.type = type;
  header.tagSeq = seq;
  header.length = static_cast<uint32_t>(std::min<size_t>(payload.size(), kMaxControlBytes));
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

std::vector<std::string> TcpTransport::queryStatus(Deadline deadline) {
  return status_.query(deadline, health_, [&](int peer, uint64_t round) {
    sendControl(peer, FrameType::kStatusQuery, round, "");
  });
}

}  // namespace xccl::net::tcp
