#include "net/transport/tcp/peer.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <sstream>

namespace xccl::net::tcp {

int Peer::upLinks() const {
  int count = 0;
  for (const auto& link : links) count += link->up ? 1 : 0;
  return count;
}

std::string Peer::describeLinks() const {
  std::ostringstream out;
  for (const auto& link : links) {
    if (link->index > 0) out << "; ";
    out << "link " << link->index << " (" << link->via << " "
        << (link->local.empty() ? "?" : link->local) << " -> "
        << (link->remote.empty() ? "?" : link->remote) << "): ";
    if (link->up) {
      out << "up";
    } else {
      out << "down" << (link->lastError.empty() ? "" : ", " + link->lastError);
    }
  }
  return out.str();
}

void watchLink(Link& link, int epollFd, int peer, bool writable) {
  if (writable == link.watchingWritable || !link.socket.valid()) return;
  epoll_event event{};
  event.events = writable ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
  event.data.u64 = linkKey(peer, link.index);
  // A failure here means the socket is already gone; the read side notices and takes it down.
  if (::epoll_ctl(epollFd, EPOLL_CTL_MOD, link.socket.fd(), &event) == 0) {
    link.watchingWritable = writable;
  }
}

int pickLink(const Peer& peer) {
  int best = -1;
  const int count = static_cast<int>(peer.links.size());
  for (int k = 0; k < count; ++k) {
    const int i = static_cast<int>((peer.nextPick + k) % count);
    const Link& link = *peer.links[i];
    if (!link.up || link.broken) continue;
    if (best < 0 || link.queue.size() < peer.links[best]->queue.size()) best = i;
  }
  return best;
}

void assignChunk(Peer& peer, uint64_t seq, int index) {
  // The next pick starts after this link: a socket that takes every chunk at once keeps its
  // queue empty, and without this rotation every tie (all queues empty) went to link 0.
  peer.nextPick = static_cast<unsigned>(index + 1);
  peer.chunk(seq).link = index;
  peer.links[index]->queue.push_back(seq);
}

void releaseAcked(Peer& peer, std::vector<RequestPtr>* completed) {
  // A chunk being written stays: its bytes are read until its frame ends, and the send that owns
  // them must not complete (and the caller reuse the buffer) before that.
  while (!peer.retained.empty() && peer.retainedBase < peer.acked &&
         peer.retained.front().writing == 0) {
    Chunk& chunk = peer.retained.front();
    if (chunk.slab >= 0) peer.freeSlabs.push_back(chunk.slab);
    if (chunk.onWritten) completed->push_back(std::move(chunk.onWritten));
    peer.retained.pop_front();
    ++peer.retainedBase;
  }
  while (!peer.sent.empty() && peer.sent.front().endSeq <= peer.retainedBase) {
    completed->push_back(std::move(peer.sent.front().request));
    peer.sent.pop_front();
  }
}

bool finishFrame(Link& link, Deadline deadline) {
  if (!link.writing) return true;
  try {
    if (link.written < sizeof(FrameHeader)) {
      link.socket.sendAll(reinterpret_cast<const uint8_t*>(&link.current) + link.written,
                          sizeof(FrameHeader) - link.written, deadline);
      link.written = sizeof(FrameHeader);
    }
    const size_t offset = link.written - sizeof(FrameHeader);
    link.socket.sendAll(link.currentPayload + offset, link.current.length - offset, deadline);
  } catch (const Error&) {
    return false;
  }
  link.writing = false;
  return true;
}

bool flushLink(Peer& peer, Link& link, int epollFd, std::vector<RequestPtr>* completed) {
  if (!link.up || link.broken || peer.failed || link.blackholed.load()) return true;
  for (;;) {
    if (!link.writing) {
      if (!link.control.empty()) {
        ControlFrame& frame = link.control.front();
        link.current = frame.header;
        link.currentControl = std::move(frame.payload);
        link.currentPayload = link.currentControl
                                  ? reinterpret_cast<const uint8_t*>(link.currentControl->data())
                                  : nullptr;
        link.control.pop_front();
      } else {
        // Chunks acknowledged meanwhile (they arrived over another link) need not go again.
        while (!link.queue.empty() && link.queue.front() < peer.acked) link.queue.pop_front();
        if (link.queue.empty()) break;
        const uint64_t seq = link.queue.front();
        if (seq >= peer.acked + kWindow) break;  // the receiver's window is full: wait for acks
        link.queue.pop_front();
        Chunk& chunk = peer.chunk(seq);
        ++chunk.writing;
        link.current = chunk.header;
        link.currentPayload = chunk.payload;
      }
      link.current.ack = peer.received.load(std::memory_order_acquire);
      link.written = 0;
      link.writing = true;
    }
    const size_t total = sizeof(FrameHeader) + link.current.length;
    iovec iov[2];
    int count = 0;
    if (link.written < sizeof(FrameHeader)) {
      iov[count++] = {reinterpret_cast<uint8_t*>(&link.current) + link.written,
                      sizeof(FrameHeader) - link.written};
      if (link.current.length > 0) {
        iov[count++] = {const_cast<uint8_t*>(link.currentPayload), link.current.length};
      }
    } else {
      const size_t offset = link.written - sizeof(FrameHeader);
      iov[count++] = {const_cast<uint8_t*>(link.currentPayload) + offset,
                      link.current.length - offset};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    const ssize_t n = ::sendmsg(link.socket.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        watchLink(link, epollFd, peer.rank, true);
        return true;
      }
      link.lastError = "send failed: " + errnoText(errno);
      link.broken = true;
      ::shutdown(link.socket.fd(), SHUT_RDWR);  // the progress thread sees it and takes it down
      return false;
    }
    link.written += static_cast<size_t>(n);
    if (link.written < total) continue;
    link.writing = false;
    link.lastSent = Clock::now();
    link.currentControl.reset();
    if (isMessage(link.current.type)) {
      Chunk& chunk = peer.chunk(link.current.seq);
      --chunk.writing;
      if (chunk.onWritten) completed->push_back(std::move(chunk.onWritten));
      link.chunksSent.fetch_add(1, std::memory_order_relaxed);
    }
  }
  watchLink(link, epollFd, peer.rank, false);
  return true;
}

}  // namespace xccl::net::tcp
