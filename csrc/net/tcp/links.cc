// TcpTransport's links: taking them up and down (replaying what a failed link carried), and the
// link manager thread that accepts connections and redials failed links in the background.
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common/logging.h"
#include "net/tcp/transport.h"

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

// One connection attempt, bounded by `deadline`: the socket, or invalid with `refused` set when
// nothing listens there any more (the peer's process is gone).
Socket dialOnce(const Address& peer, const Address* from, Deadline deadline, bool* refused) {
  *refused = false;
  const auto* sa = reinterpret_cast<const sockaddr*>(&peer.storage);
  Socket s(::socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid() || (from != nullptr && !bindSource(s.fd(), *from))) return {};
  s.setNonBlocking();
  int err = ::connect(s.fd(), sa, peer.length) == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    pollfd pfd{s.fd(), POLLOUT, 0};
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(0, left.count()))) != 1) return {};
    socklen_t len = sizeof(err);
    if (::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) return {};
  }
  if (err != 0) {
    *refused = err == ECONNREFUSED;
    return {};
  }
  s.setNoDelay();
  return s;
}

}  // namespace

Hello TcpTransport::makeHello(int link) const {
  Hello hello;
  hello.link = static_cast<uint16_t>(link);
  hello.rank = rank_;
  hello.group = group_;
  hello.nonce = nonce_;
  return hello;
}

HelloExpectation TcpTransport::expectHello(int minRank, int maxRank) const {
  return {group_, nonce_, rank_, minRank, maxRank, maxLinks_};
}

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
      linkUp(h.peer, h.link, std::move(h.socket), /*recovered=*/true);
    }
  }
}

void TcpTransport::managerLoop() {
  std::vector<Clock::time_point> nextProbe(size_);
  while (!stopping_.load()) {
    std::vector<pollfd> fds;
    for (const Socket& l : listeners_) fds.push_back({l.fd(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 20) > 0) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents != 0) acceptOneLink(listeners_[i]);
      }
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
        for (int index : due) redial(peer, index);
      } else if (!anyUp && now >= nextProbe[peer]) {
        // The peer dials us; all we can learn here is whether its process still listens.
        nextProbe[peer] = now + std::chrono::milliseconds(100);
        bool refused;
        dialOnce(Address::parse(addresses_[peer]), nullptr, now + linkTimeout_, &refused);
        if (refused) handOver({peer, 0, Socket(), true});
      }
    }
  }
}

void TcpTransport::redial(int peer, int index) {
  const Deadline deadline = Clock::now() + linkTimeout_;
  bool refused;
  const Link& link = *peers_[peer]->links[index];  // `from` and `to` never change
  Socket s = dialOnce(link.to, &link.from, deadline, &refused);
  std::string why;
  if (s.valid()) {
    try {
      const Hello hello = makeHello(index);
      s.sendAll(&hello, sizeof(hello), deadline);
      Hello reply{};
      s.recvAll(&reply, sizeof(reply), deadline);
      why = checkHello(&reply, sizeof(reply), expectHello(peer, peer), nullptr);
      if (why.empty() && reply.link != index) why = "answered for another link";
    } catch (const Error& e) {
      why = e.what();
    }
  }
  if (s.valid() && why.empty()) return handOver({peer, index, std::move(s), false});
  if (refused) return handOver({peer, index, Socket(), true});
  if (!why.empty()) XCCL_DEBUG("tcp", "redialling rank ", peer, " link ", index, ": ", why);
  std::lock_guard<std::mutex> guard(peers_[peer]->sendMutex);
  peers_[peer]->links[index]->nextDial = Clock::now() + std::chrono::milliseconds(50);
}

void TcpTransport::acceptOneLink(const Socket& listener) {
  int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  Socket s(fd);
  s.setNoDelay();
  const std::string from = socketName(fd, false);
  Hello hello{};
  try {
    s.recvAll(&hello, sizeof(hello), Clock::now() + linkTimeout_);
  } catch (const Error& e) {
    // Our peers' liveness probes connect and hang up at once; anything else is logged below.
    XCCL_DEBUG("tcp", "a connection from ", from, " closed before its handshake: ", e.what());
    return;
  }
  std::string why = checkHello(&hello, sizeof(hello), expectHello(rank_ + 1, size_ - 1), nullptr);
  if (why.empty() && hello.link >= peers_[hello.rank]->links.size()) why = "no such link";
  if (!why.empty()) {
    XCCL_WARN("tcp", "refused a connection from ", from, ": ", why);
    return;
  }
  if (peers_[hello.rank]->links[hello.link]->heldDown) return;
  try {
    const Hello reply = makeHello(hello.link);
    s.sendAll(&reply, sizeof(reply), Clock::now() + linkTimeout_);
  } catch (const Error& e) {
    return;
  }
  handOver({hello.rank, hello.link, std::move(s), false});
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
