#include "net/transport/tcp/transport.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/env.h"
#include "common/logging.h"
#include "common/thread_affinity.h"
#include "common/wait_slice.h"
#include "net/rendezvous/bootstrap.h"
#include "net/rendezvous/net_key.h"

namespace xccl::net::tcp {

// Feeds one link's frames to the transport (progress thread).
class TcpTransport::LinkSink final : public FrameSink {
 public:
  LinkSink(TcpTransport& transport, int peer, Link& link)
      : transport_(transport), peer_(peer), link_(link) {}
  uint8_t* onHeader(const FrameHeader& header) override {
    return transport_.onHeader(peer_, link_, header);
  }
  void onFrame(const FrameHeader& header) override { transport_.onFrame(peer_, link_, header); }

 private:
  TcpTransport& transport_;
  const int peer_;
  Link& link_;
};

TcpTransport::TcpTransport(Store& store, int rank, int size, const TcpOptions& options)
    : TransportBase(rank, size), peers_(size), receiving_(size) {
  XCCL_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "bad rank ", rank, " of ", size);
  links_ =
      options.streams > 0 ? options.streams : static_cast<int>(env::getInt("XCCL_NET_STREAMS"));
  linkTimeout_ = options.linkTimeout.count() > 0
                     ? options.linkTimeout
                     : std::chrono::milliseconds(env::getInt("XCCL_NET_LINK_TIMEOUT_MS"));
  peerTimeout_ = options.timeout;
  maxUnexpectedBytes_ = options.maxUnexpectedBytes > 0
                            ? options.maxUnexpectedBytes
                            : static_cast<uint64_t>(env::getInt("XCCL_NET_MAX_UNEXPECTED_BYTES"));
  epollFd_ = XCCL_SYSCHECK(::epoll_create1(EPOLL_CLOEXEC), "epoll_create1");
  wakeFd_ = XCCL_SYSCHECK(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "eventfd");
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = UINT64_MAX;
  XCCL_SYSCHECK(::epoll_ctl(epollFd_, EPOLL_CTL_ADD, wakeFd_, &event), "epoll_ctl(ADD)");
  try {
    buildMesh(store, options);
  } catch (...) {
    peers_.clear();
    ::close(wakeFd_);
    ::close(epollFd_);
    throw;
  }
  if (size_ == 1) return;
  progressThread_ = std::thread([this, cpus = options.progressCpus] {
    affinity::pinProgressThread(cpus, "tcp");  // never throws; unpinned when it cannot pin
    wait_slice::keepShort();
    progressLoop();
  });
  managerThread_ = std::thread([this] { managerLoop(); });
}

TcpTransport::~TcpTransport() {
  std::lock_guard<std::mutex> lifecycle(lifecycleMutex_);
  const bool running = progressThread_.joinable();
  stopThreads();
  // Goodbye on every link: behind everything already written on it, so a peer reads all that
  // (sends completed here are wholly written) and then closes the peer without a warning. It
  // acknowledges everything received: a peer's large sends complete only once acknowledged.
  FrameHeader bye;
  bye.type = FrameType::kBye;
  const Deadline deadline = Clock::now() + std::chrono::milliseconds(200);
  std::vector<pollfd> closing;
  for (auto& peer : peers_) {
    if (!peer || peer->failed || !running) continue;
    bye.ack = peer->received.load();
    for (auto& link : peer->links) {
      if (!link->up || !finishFrame(*link, deadline)) continue;
      try {
        link->socket.sendAll(&bye, sizeof(bye), deadline);
        ::shutdown(link->socket.fd(), SHUT_WR);
        closing.push_back({link->socket.fd(), POLLIN, 0});
      } catch (const Error&) {
      }
    }
  }
  // Until each peer closed its end (it does on the goodbye), or briefly: closing a socket with
  // unread bytes resets the connection, and a reset can drop the goodbye before it is read.
  lingerUntilClosed(closing, deadline);
  peers_.clear();
  ::close(wakeFd_);
  ::close(epollFd_);
}

void TcpTransport::lingerUntilClosed(std::vector<pollfd>& fds, Deadline deadline) {
  uint8_t sink[4096];
  size_t open = fds.size();
  while (open > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || ::poll(fds.data(), fds.size(), static_cast<int>(left.count())) <= 0) {
      return;
    }
    for (auto& fd : fds) {
      if (fd.fd < 0 || fd.revents == 0) continue;
      const ssize_t n = ::recv(fd.fd, sink, sizeof(sink), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        fd.fd = -1;  // poll skips negative descriptors
        --open;
      }
    }
  }
}

void TcpTransport::stopThreads() {
  stopping_.store(true);
  uint64_t one = 1;
  (void)!::write(wakeFd_, &one, sizeof(one));
  if (progressThread_.joinable()) progressThread_.join();
  if (managerThread_.joinable()) managerThread_.join();
}

void TcpTransport::buildMesh(Store& store, const TcpOptions& options) {
  // XCCL_SOCKET_IFNAME alone limits the interfaces as XCCL_NET_IFNAMES does (linkIfnames).
  const std::vector<std::string> ifnames =
      options.listenAddress ? options.ifnames : linkIfnames(options.ifnames);
  interfaceAddresses(ifnames);  // a bad name fails at once, before any peer waits
  if (size_ == 1) return;
  const Deadline deadline = Clock::now() + options.timeout;
  const Bootstrap bootstrap =
      Bootstrap(store, options.storePrefix, rank_, size_, options.timeout).until(deadline);
  // The key every link proves it holds, and the id that binds each link to this group's
  // creation: a token rank 0 draws, so no two groups (nor two creations under one prefix) match.
  const NetKey key = groupKey(bootstrap, "key");
  std::memcpy(terms_.key, key.data(), sizeof(terms_.key));
  Bytes token(16);
  if (rank_ == 0) randomBytes(token.data(), token.size());
  token = bootstrap.broadcast("group", 0, token);
  groupId(options.storePrefix, std::string(token.begin(), token.end()), terms_.group);
  terms_.self = rank_;

  // This rank's interfaces (docs/network.md, "xccl's own TCP: streams, several NICs").
  const bool named =
      !options.localAddresses.empty() || (!options.listenAddress && !ifnames.empty());
  std::vector<Address> chosen = options.localAddresses;
  if (chosen.empty()) {
    chosen = options.listenAddress ? std::vector<Address>{*options.listenAddress}
             : !ifnames.empty()    ? interfaceAddresses(ifnames)
                                   : std::vector<Address>{chooseListenAddress(options.storeHost)};
  }
  for (const Address& a : chosen) interfaces_.push_back(describeAddress(a));
  // A loopback first choice means one host and no network to spread over.
  if (!named && !isLoopback(chosen[0])) {
    for (Interface& other : otherInterfaces(interfaces_)) interfaces_.push_back(std::move(other));
  }
  for (Interface& it : interfaces_) {
    Address bound;
    listeners_.push_back(listenOn(it.address, &bound));
    it.address = bound;
  }
  std::vector<std::vector<Interface>> all(size_);
  std::vector<bool> allNamed(size_);
  const std::vector<std::string> lists =
      bootstrap.allGather("addr", publishInterfaces(interfaces_, named));
  for (int r = 0; r < size_; ++r) {
    bool n;
    all[r] = parseInterfaces(lists[r], &n);
    allNamed[r] = n;
    addresses_.push_back(all[r][0].address.toString());
  }
  createPeers(all, allNamed);

  terms_.links.assign(size_, 0);
  for (int peer = 0; peer < size_; ++peer) {
    if (peers_[peer]) terms_.links[peer] = static_cast<int>(peers_[peer]->links.size());
  }

  // Higher ranks dial lower ranks, every link; the handshake proves the key and names the group,
  // ranks and link (handshake.h). Dials and accepts run together under one poll, beside any
  // stranger's idle or slow connection (which holds up nobody: it ends at kHandshakeTimeout).
  // A dial that fails for a transport reason (refused, reset, closed, or timed out, e.g. because
  // a flood of strangers had it dropped at the acceptor) is retried after a short backoff until
  // the deadline; a refused hello (wrong key, group, rank) fails at once.
  struct Dial {
    Link* link;
    int peer;
    Clock::time_point next{};
    std::chrono::milliseconds backoff{10};
    bool inFlight = false;
    std::string lastFailure;
  };
  std::vector<Dial> dials;
  for (int peer = 0; peer < rank_; ++peer) {
    for (auto& owned : peers_[peer]->links) {
      dials.push_back({owned.get(), peer, {}, std::chrono::milliseconds(10), false, {}});
    }
  }
  size_t dialled = 0, expected = 0, accepted = 0;
  for (int peer = rank_ + 1; peer < size_; ++peer) expected += peers_[peer]->links.size();
  // Connecting again may help after these (the peer's queue was full, a flood had it reset);
  // not after, say, an unreachable network, which fails creation at once as before.
  const auto transient = [](int error) {
    return error == 0 || error == ECONNREFUSED || error == ECONNRESET || error == ETIMEDOUT ||
           error == EINTR || error == EAGAIN || error == EADDRNOTAVAIL || error == ECONNABORTED;
  };
  const auto retryLater = [](Dial& d, Clock::time_point now, std::string why) {
    d.inFlight = false;
    d.lastFailure = std::move(why);
    d.next = now + d.backoff;
    d.backoff = std::min(d.backoff * 2, std::chrono::milliseconds(200));
  };
  Handshakes handshakes(terms_, handshakeLogs_);
  while (dialled < dials.size() || accepted < expected) {
    auto now = Clock::now();
    if (now >= deadline) {
      std::string failures;
      for (const Dial& d : dials) {
        if (!d.link->up && !d.lastFailure.empty()) {
          failures += detail::concat("; link ", d.link->index, " to rank ", d.peer, " at ",
                                     d.link->to.toString(), ": ", d.lastFailure);
        }
      }
      XCCL_THROW(ErrorKind::kTimeout, "timed out building the group's links: ", dialled, " of ",
                 dials.size(), " dialled to lower ranks, ", accepted, " of ", expected,
                 " accepted from higher ranks", failures);
    }
    auto wait = std::min(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) +
                             std::chrono::milliseconds(1),
                         std::chrono::milliseconds(100));
    for (Dial& d : dials) {
      if (d.link->up || d.inFlight) continue;
      if (now < d.next) {
        wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(d.next - now) +
                                  std::chrono::milliseconds(1));
        continue;
      }
      int error;
      bool bindFailed;
      Socket socket = startConnect(d.link->to, &d.link->from, &error, &bindFailed);
      if (bindFailed) {
        XCCL_THROW(ErrorKind::kPeerFailure, "cannot bind to ", d.link->from.toString(),
                   " to connect to ", d.link->to.toString(), ": ", errnoText(error));
      }
      if (!socket.valid() && !transient(error)) {
        XCCL_THROW(ErrorKind::kPeerFailure, "cannot connect to ", d.link->to.toString(), ": ",
                   errnoText(error));
      }
      if (!socket.valid()) {
        retryLater(d, now, "cannot connect: " + errnoText(error));
        continue;
      }
      // One attempt lasts at most as long as an acceptor waits for a handshake.
      handshakes.add(std::make_unique<Handshake>(std::move(socket), terms_, d.peer, d.link->index,
                                                 std::min(deadline, now + kHandshakeTimeout)));
      d.inFlight = true;
    }
    for (auto& h : handshakes.poll(listeners_, wait)) {
      now = Clock::now();
      if (h->dialing()) {
        Dial& d = *std::find_if(dials.begin(), dials.end(), [&](const Dial& x) {
          return x.peer == h->peer() && x.link->index == h->link();
        });
        if (h->status() == Handshake::Status::kDone) {
          d.inFlight = false;
          linkUp(h->peer(), h->link(), h->take(), /*recovered=*/false);
          ++dialled;
        } else if (!transient(h->connectError())) {
          XCCL_THROW(ErrorKind::kPeerFailure, "cannot connect to ", d.link->to.toString(), ": ",
                     errnoText(h->connectError()));
        } else if (h->verdict()) {
          XCCL_THROW(ErrorKind::kPeerFailure, "the process at ", d.link->to.toString(),
                     " is not rank ", h->peer(), " of this group: ", h->why());
        } else {
          XCCL_DEBUG("tcp", "retrying link ", h->link(), " to rank ", h->peer(), " at ",
                     d.link->to.toString(), ": ", h->why());
          retryLater(d, now, h->why());
        }
      } else if (h->status() != Handshake::Status::kDone) {
        if (h->received() > 0) {
          XCCL_WARN_LIMITED(handshakeLogs_.refused, "tcp", "refused a connection from ", h->from(),
                            " while building the group: ", h->why());
        } else {
          XCCL_DEBUG("tcp", "a connection from ", h->from(),
                     " ended before its handshake while building the group: ", h->why());
        }
      } else if (peers_[h->peer()]->links[h->link()]->up) {
        XCCL_WARN_LIMITED(handshakeLogs_.refused, "tcp", "refused a second connection for link ",
                          h->link(), " of rank ", h->peer(), " while building the group");
      } else {
        linkUp(h->peer(), h->link(), h->take(), /*recovered=*/false);
        ++accepted;
      }
    }
  }
}

void TcpTransport::createPeers(const std::vector<std::vector<Interface>>& interfaces,
                               const std::vector<bool>& named) {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const bool dialing = rank_ > peer;  // higher ranks dial: pairs are (dialer's, acceptor's)
    const auto pairs =
        dialing ? pairInterfaces(interfaces_, interfaces[peer], named[rank_] && named[peer])
                : pairInterfaces(interfaces[peer], interfaces_, named[rank_] && named[peer]);
    auto p = std::make_unique<Peer>(peer, static_cast<int>(pairs.size()) * links_);
    std::string over;
    for (auto& link : p->links) {
      const auto [dialer, acceptor] = pairs[link->index / links_];
      const Interface& mine = interfaces_[dialing ? dialer : acceptor];
      link->via = mine.name;
      link->from = mine.address;
      link->to = interfaces[peer][dialing ? acceptor : dialer].address;
      if (link->index % links_ == 0) {
        over += (over.empty() ? "" : ", ") + link->via + " " + mine.address.toString();
      }
    }
    XCCL_DEBUG("tcp", "rank ", peer, ": ", p->links.size(), " link(s) over ", over);
    maxLinks_ = std::max(maxLinks_, static_cast<int>(p->links.size()));
    receiving_[peer].seen.assign(kWindow / 64, 0);
    receiving_[peer].slots.resize(p->links.size());
    peers_[peer] = std::move(p);
  }
}

void TcpTransport::progressLoop() {
  epoll_event events[64];
  const int tickMs = static_cast<int>(std::max<int64_t>(1, linkTimeout_.count() / 8));
  Clock::time_point nextTick = Clock::now();
  for (;;) {
    int n = ::epoll_wait(epollFd_, events, 64, tickMs);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      failAll(Error(ErrorKind::kSystem, "epoll_wait failed: " + errnoText(errno)));
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
          completeAll(completed);
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
      failAll(e);
      return;
    }
  }
}

bool TcpTransport::readLink(int peer, Link& link) {
  LinkSink sink(*this, peer, link);
  // Bounded, so that one busy link cannot starve the others.
  for (int round = 0; round < 64; ++round) {
    if (!link.up || link.blackholed.load()) return false;
    const FrameReader::Space space = link.reader.next();
    const ssize_t n = ::recv(link.socket.fd(), space.data, space.bytes, MSG_DONTWAIT);
    if (n == 0) {
      if (peers_[peer]->saidBye) {
        closedAfterBye(peer, link.index);
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

void TcpTransport::takeBrokenDown(int peer, Link& link) {
  // What the peer wrote before the write failed is still readable, and may say why (an abort
  // frame, a goodbye): read it first.
  while (readLink(peer, link)) {
  }
  if (link.up) linkDown(peer, link.index, link.lastError);
}

void TcpTransport::tick(Clock::time_point now) {
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
      failPeer(peer,
               Error(ErrorKind::kPeerFailure, detail::concat("no link to rank ", peer, " for ",
                                                             peerTimeout_.count(), " ms: ", links)),
               false);
    }
  }
}

void TcpTransport::sendAcks() {
  for (int peer = 0; peer < size_; ++peer) {
    if (!peers_[peer]) continue;
    Receiving& r = receiving_[peer];
    Peer& p = *peers_[peer];
    const uint64_t received = p.received.load(std::memory_order_relaxed);
    // Acknowledge at once when a message completed (its sender may be waiting for it), else
    // every few chunks so that the sender's retained data stays small.
    if (received == p.ackSent || (!r.ackDue && received - p.ackSent < 16)) continue;
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
    r.ackDue = false;
    completeAll(completed);
  }
}

void TcpTransport::flushPeer(Peer& peer, std::vector<RequestPtr>* completed) {
  for (auto& link : peer.links) flushLink(peer, *link, epollFd_, completed);
  releaseAcked(peer, completed);
}

}  // namespace xccl::net::tcp
