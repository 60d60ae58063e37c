#include "net/transport/tcp/progress_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "common/logging.h"
#include "common/thread_affinity.h"
#include "common/wait_slice.h"

namespace xccl::net::tcp {
namespace {

std::string socketName(int fd, bool local) {
  Address a;
  a.length = sizeof(a.storage);
  auto* sa = reinterpret_cast<sockaddr*>(&a.storage);
  if ((local ? ::getsockname(fd, sa, &a.length) : ::getpeername(fd, sa, &a.length)) != 0)
    return "?";
  return a.toString();
}

}  // namespace

ProgressLoop::ProgressLoop(Peers& peers, std::chrono::milliseconds linkTimeout,
                           std::chrono::milliseconds peerTimeout, const std::atomic<bool>& stopping,
                           MessageReceiver& receiver, ChunkSender& sender, Owner& owner)
    : size_(static_cast<int>(peers.size())),
      peers_(peers),
      linkTimeout_(linkTimeout),
      peerTimeout_(peerTimeout),
      stopping_(stopping),
      receiver_(receiver),
      sender_(sender),
      owner_(owner) {
  epollFd_ = XCCL_SYSCHECK(::epoll_create1(EPOLL_CLOEXEC), "epoll_create1");
  wakeFd_ = XCCL_SYSCHECK(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "eventfd");
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = UINT64_MAX;
  XCCL_SYSCHECK(::epoll_ctl(epollFd_, EPOLL_CTL_ADD, wakeFd_, &event), "epoll_ctl(ADD)");
}

ProgressLoop::~ProgressLoop() {
  ::close(wakeFd_);
  ::close(epollFd_);
}

void ProgressLoop::start(const std::vector<int>& cpus) {
  thread_ = std::thread([this, cpus] {
    affinity::pinProgressThread(cpus, "tcp");  // never throws; unpinned when it cannot pin
    wait_slice::keepShort();
    progressLoop();
  });
}

void ProgressLoop::wake() {
  uint64_t one = 1;
  (void)!::write(wakeFd_, &one, sizeof(one));
}

void ProgressLoop::progressLoop() {
  epoll_event events[64];
  const int tickMs = static_cast<int>(std::max<int64_t>(1, linkTimeout_.count() / 8));
  Clock::time_point nextTick = Clock::now();
  for (;;) {
    int n = ::epoll_wait(epollFd_, events, 64, tickMs);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      owner_.progressStopped(Error(ErrorKind::kSystem, "epoll_wait failed: " + errnoText(errno)));
      return;
    }
    if (stopping_.load()) return;
    try {
      for (int i = 0; i < n; ++i) {
        const uint64_t key = events[i].data.u64;
        if (key == UINT64_MAX) {
          uint64_t drained;
          (void)!::read(wakeFd_, &drained, sizeof(drained));
          takeHandovers();
          continue;
        }
        const int peer = static_cast<int>(key >> 16);
        Peer& p = *peers_[peer];
        Link& link = *p.links[key & 0xffff];
        if (!link.up) continue;  // an event for a socket already taken down
        if (events[i].events & EPOLLOUT) {
          std::vector<RequestPtr> completed;
          {
            std::lock_guard<std::mutex> guard(p.sendMutex);
            flushLink(p, link, epollFd_, &completed);
            releaseAcked(p, &completed);
          }
          owner_.complete(completed);
        }
        if (link.broken) {
          takeBrokenDown(peer, link);
        } else if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
          readLink(peer, link);
        }
      }
      sendAcks();
      const auto now = Clock::now();
      if (now >= nextTick) {
        tick(now);
        nextTick = now + std::chrono::milliseconds(tickMs);
      }
    } catch (const Error& e) {
      owner_.progressStopped(e);
      return;
    }
  }
}

bool ProgressLoop::readLink(int peer, Link& link) {
  MessageReceiver::LinkFrames sink(receiver_, peer, link);
  // Bounded, so that one busy link cannot starve the others.
  for (int round = 0; round < 64; ++round) {
    if (!link.up || link.blackholed.load()) return false;
    const FrameReader::Space space = link.reader.next();
    const ssize_t n = ::recv(link.socket.fd(), space.data, space.bytes, MSG_DONTWAIT);
    if (n == 0) {
      if (peers_[peer]->saidBye) {
        owner_.closedAfterBye(peer, link.index);
      } else {
        linkDown(peer, link.index, "closed by the peer");
      }
      return false;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      linkDown(peer, link.index, "receive failed: " + errnoText(errno));
      return false;
    }
    link.lastHeard = Clock::now();
    const std::string why = link.reader.advance(static_cast<size_t>(n), sink);
    if (!why.empty()) {
      linkDown(peer, link.index, "dropped a corrupt stream: " + why);
      return false;
    }
  }
  return true;
}

void ProgressLoop::takeBrokenDown(int peer, Link& link) {
  // What the peer wrote before the write failed is still readable, and may say why (an abort
  // frame, a goodbye): read it first.
  while (readLink(peer, link)) {
  }
  if (link.up) linkDown(peer, link.index, link.lastError);
}

void ProgressLoop::tick(Clock::time_point now) {
  for (int peer = 0; peer < size_; ++peer) {
    if (!peers_[peer]) continue;
    Peer& p = *peers_[peer];
    bool anyUp = false;
    Clock::time_point lastDown{};
    for (auto& owned : p.links) {
      Link& link = *owned;
      if (link.broken) takeBrokenDown(peer, link);
      if (!link.up) {
        lastDown = std::max(lastDown, link.downSince);
        continue;
      }
      anyUp = true;
      if (now - link.lastHeard > linkTimeout_) {
        linkDown(peer, link.index,
                 detail::concat("nothing received for ", linkTimeout_.count(),
                                " ms (XCCL_NET_LINK_TIMEOUT_MS): a silent path"));
        continue;
      }
      std::vector<RequestPtr> completed;
      std::lock_guard<std::mutex> guard(p.sendMutex);
      if (!link.writing && link.control.empty() && link.queue.empty() &&
          now - link.lastSent > linkTimeout_ / 4) {
        FrameHeader heartbeat;
        heartbeat.type = FrameType::kAck;
        link.control.push_back({heartbeat, nullptr});
        flushLink(p, link, epollFd_, &completed);
      }
    }
    bool failed;
    {
      std::lock_guard<std::mutex> guard(p.sendMutex);
      failed = p.failed;
    }
    if (!anyUp && !failed && now - lastDown > peerTimeout_) {
      std::string links;
      {
        std::lock_guard<std::mutex> guard(p.sendMutex);
        links = p.describeLinks();
      }
      owner_.losePeer(peer, Error(ErrorKind::kPeerFailure,
                                  detail::concat("no link to rank ", peer, " for ",
                                                 peerTimeout_.count(), " ms: ", links)));
    }
  }
}

void ProgressLoop::sendAcks() {
  for (int peer = 0; peer < size_; ++peer) {
    if (!peers_[peer]) continue;
    Peer& p = *peers_[peer];
    const uint64_t received = p.received.load(std::memory_order_relaxed);
    // Acknowledge at once when a message completed (its sender may be waiting for it), else
    // every few chunks so that the sender's retained data stays small.
    if (received == p.ackSent || (!receiver_.ackDue(peer) && received - p.ackSent < 16)) continue;
    std::vector<RequestPtr> completed;
    {
      std::lock_guard<std::mutex> guard(p.sendMutex);
      const int index = pickLink(p);
      if (index < 0) continue;
      FrameHeader ack;
      ack.type = FrameType::kAck;
      p.links[index]->control.push_back({ack, nullptr});
      flushLink(p, *p.links[index], epollFd_, &completed);
    }
    p.ackSent = received;
    receiver_.ackSent(peer);
    owner_.complete(completed);
  }
}

void ProgressLoop::linkUp(int peer, int index, Socket socket, bool recovered) {
  Peer& p = *peers_[peer];
  if (p.links[index]->up) linkDown(peer, index, "replaced by a new connection", /*quiet=*/true);
  tuneSocket(socket);
  std::vector<RequestPtr> completed;
  std::string local, remote;
  {
    std::lock_guard<std::mutex> guard(p.sendMutex);
    if (p.failed) return;
    Link& link = *p.links[index];
    link.socket = std::move(socket);
    link.local = local = socketName(link.socket.fd(), true);
    link.remote = remote = socketName(link.socket.fd(), false);
    link.up = true;
    link.broken = false;
    link.watchingWritable = false;
    link.lastHeard = link.lastSent = Clock::now();
    link.reader = FrameReader{};
    link.readingSeq = UINT64_MAX;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = linkKey(peer, index);
    XCCL_SYSCHECK(::epoll_ctl(epollFd_, EPOLL_CTL_ADD, link.socket.fd(), &event), "epoll_ctl(ADD)");
    // Chunks that waited for any link at all go on this one.
    for (uint64_t seq = std::max(p.acked, p.retainedBase); seq < p.nextSeq; ++seq) {
      if (p.chunk(seq).link < 0) assignChunk(p, seq, index);
    }
    if (recovered) link.recoveries.fetch_add(1);
    sender_.flushPeer(p, &completed);
  }
  receiver_.resetSlot(peer, index);
  if (recovered) {
    XCCL_WARN("tcp", "link ", index, " to rank ", peer, " (", p.links[index]->via, " ", local,
              " -> ", remote, ") is up again");
  }
  owner_.complete(completed);
}

void ProgressLoop::linkDown(int peer, int index, const std::string& why, bool quiet) {
  Peer& p = *peers_[peer];
  std::vector<RequestPtr> completed;
  size_t replayed = 0;
  int surviving;
  std::string local, remote;
  {
    std::lock_guard<std::mutex> guard(p.sendMutex);
    Link& link = *p.links[index];
    if (!link.up) return;
    link.up = false;
    link.broken = false;
    link.blackholed = false;
    link.lastError = why;
    link.downSince = Clock::now();
    link.nextDial = link.downSince;
    local = link.local;
    remote = link.remote;
    ::epoll_ctl(epollFd_, EPOLL_CTL_DEL, link.socket.fd(), nullptr);
    link.socket.close();  // writers hold sendMutex, so none is using the descriptor now
    if (link.writing && isMessage(link.current.type)) --p.chunk(link.current.seq).writing;
    link.writing = false;
    link.currentControl.reset();
    link.queue.clear();
    link.control.clear();
    link.failures.fetch_add(1);
    // Everything this link carried that the peer has not acknowledged goes again, in order, on
    // the surviving links; the peer drops what it already had by sequence number.
    for (uint64_t seq = std::max(p.acked, p.retainedBase); seq < p.nextSeq; ++seq) {
      Chunk& chunk = p.chunk(seq);
      if (chunk.link != index) continue;
      chunk.link = -1;
      const int target = pickLink(p);
      if (target >= 0) assignChunk(p, seq, target);
      ++replayed;
    }
    surviving = p.upLinks();
    sender_.flushPeer(p, &completed);
  }
  receiver_.abandonSlot(peer, index);
  p.links[index]->reader = FrameReader{};
  p.links[index]->readingSeq = UINT64_MAX;
  if (!quiet) {
    XCCL_WARN("tcp", "link ", index, " to rank ", peer, " (", p.links[index]->via, " ", local,
              " -> ", remote, ") is down: ", why, "; ", replayed, " unacknowledged chunk(s) ",
              surviving > 0 ? detail::concat("replayed on ", surviving, " other link(s)")
                            : std::string("wait for a link to come back"));
  }
  owner_.complete(completed);
}

void ProgressLoop::handOver(Handover handover) {
  {
    std::lock_guard<std::mutex> guard(handoverMutex_);
    handovers_.push_back(std::move(handover));
  }
  wake();
}

void ProgressLoop::takeHandovers() {
  std::vector<Handover> taken;
  {
    std::lock_guard<std::mutex> guard(handoverMutex_);
    taken.swap(handovers_);
  }
  for (auto& h : taken) {
    if (h.peerGone) {
      bool anyUp;
      {
        std::lock_guard<std::mutex> guard(peers_[h.peer]->sendMutex);
        anyUp = peers_[h.peer]->upLinks() > 0;
      }
      if (!anyUp) {
        owner_.losePeer(h.peer, Error(ErrorKind::kPeerFailure,
                                      detail::concat("rank ", h.peer,
                                                     " closed its connections (the process "
                                                     "exited, was killed, or aborted)")));
      }
    } else {
      // A new connection never displaces a healthy link, however well it proved itself: only
      // one the health logic (tick) would take down, silent for linkTimeout_. An end the peer
      // already closed shows once what is there is read.
      Link& link = *peers_[h.peer]->links[h.link];
      if (link.up) readLink(h.peer, link);
      const auto heard =
          std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - link.lastHeard);
      if (link.up && heard <= linkTimeout_) {
        XCCL_INFO("tcp", "kept link ", h.link, " to rank ", h.peer, ": a new connection for it ",
                  "came while it is healthy (heard ", heard.count(), " ms ago)");
        continue;  // the new socket closes; its dialer redials once it sees that
      }
      linkUp(h.peer, h.link, std::move(h.socket), /*recovered=*/true);
    }
  }
}

void ProgressLoop::closeLinksLocked(Peer& p) {
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
}

void ProgressLoop::blackholeLink(int peer, int index) {
  Peer& p = *peers_.at(peer);
  std::lock_guard<std::mutex> guard(p.sendMutex);
  Link& link = *p.links.at(index);
  if (!link.up) return;
  link.blackholed = true;
  epoll_event event{};  // no events: nothing is read or written until the link is taken down
  event.data.u64 = linkKey(peer, index);
  ::epoll_ctl(epollFd_, EPOLL_CTL_MOD, link.socket.fd(), &event);
  link.watchingWritable = false;
}

}  // namespace xccl::net::tcp
