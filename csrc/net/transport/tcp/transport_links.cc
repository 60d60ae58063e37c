// TcpTransport's links: taking them up and down (replaying what a failed link carried), and the
// link manager thread that accepts connections and redials failed links in the background.
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common/logging.h"
#include "net/transport/tcp/transport.h"

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

// Starts a non-blocking connection: the socket (connected or connecting), or invalid with
// `refused` set when nothing listens there any more (the peer's process is gone).
Socket startDial(const Address& peer, const Address* from, bool* refused) {
  int error;
  bool bindFailed;
  Socket s = startConnect(peer, from, &error, &bindFailed);
  *refused = !s.valid() && !bindFailed && error == ECONNREFUSED;
  return s;
}

// A liveness probe: a connection attempt to a peer's listener, looked at without waiting.
struct Probe {
  Socket socket;
  Clock::time_point deadline{};
  // True once it ended: connected, failed or timed out; `refused` when nothing listens there.
  bool ended(Clock::time_point now, bool* refused) {
    *refused = false;
    pollfd pfd{socket.fd(), POLLOUT, 0};
    if (::poll(&pfd, 1, 0) == 1) {
      int err = 0;
      socklen_t len = sizeof(err);
      *refused =
          ::getsockopt(socket.fd(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == ECONNREFUSED;
      return true;
    }
    return now >= deadline;
  }
};

}  // namespace

void TcpTransport::linkUp(int peer, int index, Socket socket, bool recovered) {
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
    flushPeer(p, &completed);
  }
  receiving_[peer].slots[index] = {};
  if (recovered) {
    XCCL_WARN("tcp", "link ", index, " to rank ", peer, " (", p.links[index]->via, " ", local,
              " -> ", remote, ") is up again");
  }
  completeAll(completed);
}

void TcpTransport::linkDown(int peer, int index, const std::string& why, bool quiet) {
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
    flushPeer(p, &completed);
  }
  Receiving::Slot& slot = receiving_[peer].slots[index];
  unpin(slot);  // the chunk it was reading into registered memory is abandoned
  slot = {};
  p.links[index]->reader = FrameReader{};
  p.links[index]->readingSeq = UINT64_MAX;
  if (!quiet) {
    XCCL_WARN("tcp", "link ", index, " to rank ", peer, " (", p.links[index]->via, " ", local,
              " -> ", remote, ") is down: ", why, "; ", replayed, " unacknowledged chunk(s) ",
              surviving > 0 ? detail::concat("replayed on ", surviving, " other link(s)")
                            : std::string("wait for a link to come back"));
  }
  completeAll(completed);
}

void TcpTransport::handOver(Handover handover) {
  {
    std::lock_guard<std::mutex> guard(handoverMutex_);
    handovers_.push_back(std::move(handover));
  }
  uint64_t one = 1;
  (void)!::write(wakeFd_, &one, sizeof(one));
}

void TcpTransport::takeHandovers() {
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
        failPeer(h.peer,
                 Error(ErrorKind::kPeerFailure,
                       detail::concat("rank ", h.peer,
                                      " closed its connections (the process exited, was killed, "
                                      "or aborted)")),
                 false);
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

void TcpTransport::managerLoop() {
  // Accepted and dialled handshakes run together (handshake.h): none blocks another, nor the
  // redials and probes below.
  Handshakes handshakes(terms_, handshakeLogs_);
  std::vector<Clock::time_point> nextProbe(size_);
  std::vector<Probe> probes(size_);
  while (!stopping_.load()) {
    for (auto& ended : handshakes.poll(listeners_, std::chrono::milliseconds(20))) {
      handshakeEnded(std::move(ended));
    }
    const auto now = Clock::now();
    for (int peer = 0; peer < size_ && !stopping_.load(); ++peer) {
      if (!peers_[peer]) continue;
      Peer& p = *peers_[peer];
      std::vector<int> due;
      bool anyUp;
      {
        std::lock_guard<std::mutex> guard(p.sendMutex);
        if (p.failed) continue;
        anyUp = p.upLinks() > 0;
        for (auto& link : p.links) {
          if (!link->up && !link->heldDown && now >= link->nextDial) due.push_back(link->index);
        }
      }
      if (peer < rank_) {
        for (int index : due) {
          if (!handshakes.dialling(peer, index)) redial(handshakes, peer, index);
        }
      } else if (probes[peer].socket.valid()) {
        bool refused;
        if (!probes[peer].ended(now, &refused)) continue;
        probes[peer].socket.close();
        if (refused) handOver({peer, 0, Socket(), true});
      } else if (!anyUp && now >= nextProbe[peer]) {
        // The peer dials us; all we can learn here is whether its process still listens. Not
        // waited for: a peer whose host is silent must not hold up the others.
        nextProbe[peer] = now + std::chrono::milliseconds(100);
        bool refused;
        probes[peer] = {startDial(Address::parse(addresses_[peer]), nullptr, &refused),
                        now + linkTimeout_};
        if (refused) handOver({peer, 0, Socket(), true});
      }
    }
  }
}

void TcpTransport::redial(Handshakes& handshakes, int peer, int index) {
  bool refused;
  const Link& link = *peers_[peer]->links[index];  // `from` and `to` never change
  Socket s = startDial(link.to, &link.from, &refused);
  if (s.valid()) {
    handshakes.add(std::make_unique<Handshake>(std::move(s), terms_, peer, index,
                                               Clock::now() + linkTimeout_));
    return;
  }
  if (refused) return handOver({peer, index, Socket(), true});
  std::lock_guard<std::mutex> guard(peers_[peer]->sendMutex);
  peers_[peer]->links[index]->nextDial = Clock::now() + std::chrono::milliseconds(50);
}

void TcpTransport::handshakeEnded(std::unique_ptr<Handshake> h) {
  const bool done = h->status() == Handshake::Status::kDone;
  if (h->dialing()) {
    {
      // Also after a success: the progress thread takes the link up a moment later, and the
      // link must not be dialled again meanwhile.
      std::lock_guard<std::mutex> guard(peers_[h->peer()]->sendMutex);
      peers_[h->peer()]->links[h->link()]->nextDial = Clock::now() + std::chrono::milliseconds(50);
    }
    if (done) return handOver({h->peer(), h->link(), h->take(), false});
    if (h->refused()) return handOver({h->peer(), h->link(), Socket(), true});
    XCCL_DEBUG("tcp", "redialling rank ", h->peer(), " link ", h->link(), ": ", h->why());
    return;
  }
  if (!done) {
    if (h->received() == 0) {
      // Our peers' liveness probes connect and hang up at once; anything else is logged below.
      XCCL_DEBUG("tcp", "a connection from ", h->from(), " ended before its handshake: ", h->why());
    } else {
      XCCL_WARN_LIMITED(handshakeLogs_.refused, "tcp", "refused a connection from ", h->from(),
                        ": ", h->why());
    }
    return;
  }
  if (peers_[h->peer()]->links[h->link()]->heldDown) return;
  handOver({h->peer(), h->link(), h->take(), false});
}

TcpTransport::LinkCounters TcpTransport::linkCounters(int peer, int index) {
  Peer& p = *peers_.at(peer);
  std::lock_guard<std::mutex> guard(p.sendMutex);
  Link& link = *p.links.at(index);
  return {link.up, link.chunksSent.load(), link.chunksReceived.load(), link.failures.load(),
          link.recoveries.load()};
}

void TcpTransport::killLink(int peer, int index, bool stayDown) {
  Peer& p = *peers_.at(peer);
  std::lock_guard<std::mutex> guard(p.sendMutex);
  Link& link = *p.links.at(index);
  link.heldDown = stayDown;
  if (link.up) ::shutdown(link.socket.fd(), SHUT_RDWR);
}

void TcpTransport::blackholeLink(int peer, int index) {
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
