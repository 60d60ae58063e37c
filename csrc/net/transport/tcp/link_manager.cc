#include "net/transport/tcp/link_manager.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "common/logging.h"
#include "net/rendezvous/bootstrap.h"
#include "net/rendezvous/net_key.h"
#include "net/transport/tcp/options.h"

namespace xccl::net::tcp {
namespace {

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

void LinkManager::build(Store& store, const TcpOptions& options) {
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
          owner_.linkConnected(h->peer(), h->link(), h->take());
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
        owner_.linkConnected(h->peer(), h->link(), h->take());
        ++accepted;
      }
    }
  }
}

void LinkManager::createPeers(const std::vector<std::vector<Interface>>& interfaces,
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
    owner_.peerCreated(peer, static_cast<int>(p->links.size()));
    peers_[peer] = std::move(p);
  }
}

void LinkManager::managerLoop() {
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
        if (refused) owner_.handOver({peer, 0, Socket(), true});
      } else if (!anyUp && now >= nextProbe[peer]) {
        // The peer dials us; all we can learn here is whether its process still listens. Not
        // waited for: a peer whose host is silent must not hold up the others.
        nextProbe[peer] = now + std::chrono::milliseconds(100);
        bool refused;
        probes[peer] = {startDial(Address::parse(addresses_[peer]), nullptr, &refused),
                        now + linkTimeout_};
        if (refused) owner_.handOver({peer, 0, Socket(), true});
      }
    }
  }
}

void LinkManager::redial(Handshakes& handshakes, int peer, int index) {
  bool refused;
  const Link& link = *peers_[peer]->links[index];  // `from` and `to` never change
  Socket s = startDial(link.to, &link.from, &refused);
  if (s.valid()) {
    handshakes.add(std::make_unique<Handshake>(std::move(s), terms_, peer, index,
                                               Clock::now() + linkTimeout_));
    return;
  }
  if (refused) return owner_.handOver({peer, index, Socket(), true});
  std::lock_guard<std::mutex> guard(peers_[peer]->sendMutex);
  peers_[peer]->links[index]->nextDial = Clock::now() + std::chrono::milliseconds(50);
}

void LinkManager::handshakeEnded(std::unique_ptr<Handshake> h) {
  const bool done = h->status() == Handshake::Status::kDone;
  if (h->dialing()) {
    {
      // Also after a success: the progress thread takes the link up a moment later, and the
      // link must not be dialled again meanwhile.
      std::lock_guard<std::mutex> guard(peers_[h->peer()]->sendMutex);
      peers_[h->peer()]->links[h->link()]->nextDial = Clock::now() + std::chrono::milliseconds(50);
    }
    if (done) return owner_.handOver({h->peer(), h->link(), h->take(), false});
    if (h->refused()) return owner_.handOver({h->peer(), h->link(), Socket(), true});
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
  owner_.handOver({h->peer(), h->link(), h->take(), false});
}

}  // namespace xccl::net::tcp
