#include "net/transport/tcp/handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <sys/resource.h>

#include <algorithm>
#include <mutex>
#include <tuple>

#include "common/logging.h"
#include "net/rendezvous/net_key.h"

namespace xccl::net::tcp {
namespace {

std::string remoteName(int fd) {
  Address a;
  a.length = sizeof(a.storage);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) return "?";
  return a.toString();
}

struct Nonce {
  uint8_t bytes[kNonceBytes];
  Nonce() { randomBytes(bytes, sizeof(bytes)); }
};

}  // namespace

Handshake::Handshake(Socket socket, const HandshakeTerms& terms, int peer, int link,
                     Deadline deadline)
    : socket_(std::move(socket)),
      exchange_(terms, peer, link, Nonce().bytes),
      dialing_(true),
      connecting_(true),
      deadline_(deadline) {}

Handshake::Handshake(Socket socket, const HandshakeTerms& terms, Deadline deadline)
    : socket_(std::move(socket)),
      exchange_(terms, Nonce().bytes),
      dialing_(false),
      connecting_(false),
      deadline_(deadline),
      from_(remoteName(socket_.fd())) {}

short Handshake::events() const { return connecting_ || outSent_ < outBytes_ ? POLLOUT : POLLIN; }

Handshake::Status Handshake::fail(std::string why) {
  why_ = std::move(why);
  socket_.close();
  return status_ = Status::kFailed;
}

Handshake::Status Handshake::advance() {
  if (status_ != Status::kRunning) return status_;
  if (connecting_) {
    int err = 0;
    socklen_t len = sizeof(err);
    pollfd pfd{socket_.fd(), POLLOUT, 0};
    if (::poll(&pfd, 1, 0) == 0) return status_;  // still connecting
    if (::getsockopt(socket_.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err != 0) {
      refused_ = err == ECONNREFUSED;
      connectError_ = err;
      return fail("cannot connect: " + errnoText(err));
    }
    connecting_ = false;
    from_ = remoteName(socket_.fd());
  }
  for (;;) {
    if (outSent_ == outBytes_ && exchange_.outgoing(&out_)) {
      outSent_ = 0;
      outBytes_ = sizeof(out_);
    }
    if (outSent_ < outBytes_) {
      const ssize_t n = ::send(socket_.fd(), reinterpret_cast<const uint8_t*>(&out_) + outSent_,
                               outBytes_ - outSent_, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return status_;
      if (n < 0) return fail("send failed: " + errnoText(errno));
      outSent_ += static_cast<size_t>(n);
      continue;
    }
    // Everything said: the dialer is done once its proof is out (the acceptor closes the
    // connection if it refuses the proof, and the link is taken down and redialled).
    if (exchange_.done()) return status_ = Status::kDone;
    const ssize_t n = ::recv(socket_.fd(), in_ + inGot_, sizeof(in_) - inGot_, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return status_;
    if (n < 0) return fail("receive failed: " + errnoText(errno));
    if (n == 0) return fail("closed during the handshake");
    inGot_ += static_cast<size_t>(n);
    received_ += static_cast<size_t>(n);
    if (inGot_ < sizeof(in_)) continue;
    inGot_ = 0;
    if (std::string why = exchange_.receive(in_, sizeof(in_)); !why.empty()) {
      verdict_ = true;
      return fail(std::move(why));
    }
    heardHello_ = true;
  }
}

void finishDial(Handshake& handshake, const std::string& address) {
  while (handshake.advance() == Handshake::Status::kRunning) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(handshake.deadline() - Clock::now());
    if (left.count() <= 0) {
      XCCL_THROW(ErrorKind::kTimeout, "handshake with ", address, " (rank ", handshake.peer(),
                 ") timed out");
    }
    pollfd pfd{handshake.fd(), handshake.events(), 0};
    const int rc = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    if (rc < 0 && errno != EINTR) detail::throwSystemError(__FILE__, __LINE__, "poll", errno);
  }
  if (handshake.status() == Handshake::Status::kFailed) {
    XCCL_THROW(ErrorKind::kPeerFailure, "the process at ", address, " is not rank ",
               handshake.peer(), " of this group: ", handshake.why());
  }
}

void Handshake::expire() {
  if (status_ != Status::kRunning) return;
  fail(connecting_ ? "cannot connect: timed out"
                   : detail::concat("no complete handshake by its deadline (", inGot_,
                                    " of a hello's ", sizeof(Hello), " bytes had come)"));
}

// Every Handshakes of the process, and how many accepted handshakes they hold (not evicted).
// Its lock is held while any of them changes its list or advances a handshake, so that one
// Handshakes may pick and evict another's handshake (by shutting its socket down: the owner sees
// it readable at once and drops it).
struct Handshakes::Registry {
  std::mutex mutex;
  std::vector<Handshakes*> sets;
  size_t accepted = 0;
  uint64_t order = 0;
};

Handshakes::Registry& Handshakes::registry() {
  static Registry* const r = new Registry;  // never destroyed: used by threads until exit
  return *r;
}

Handshakes::Handshakes(const HandshakeTerms& terms, HandshakeLogs& logs)
    : terms_(terms), logs_(logs) {
  Registry& r = registry();
  std::lock_guard<std::mutex> guard(r.mutex);
  r.sets.push_back(this);
}

Handshakes::~Handshakes() {
  Registry& r = registry();
  std::lock_guard<std::mutex> guard(r.mutex);
  r.sets.erase(std::find(r.sets.begin(), r.sets.end(), this));
  r.accepted -= accepted_;
  running_.clear();
}

size_t Handshakes::accepted() const {
  std::lock_guard<std::mutex> guard(registry().mutex);
  return accepted_;
}

size_t Handshakes::acceptedInProcess() {
  std::lock_guard<std::mutex> guard(registry().mutex);
  return registry().accepted;
}

void Handshakes::add(std::unique_ptr<Handshake> handshake) {
  std::lock_guard<std::mutex> guard(registry().mutex);
  running_.push_back(std::move(handshake));
}

bool Handshakes::dialling(int peer, int link) const {
  // running_ changes only on this thread: reading it needs no lock here.
  return std::any_of(running_.begin(), running_.end(), [&](const auto& h) {
    return h->dialing() && h->peer() == peer && h->link() == link;
  });
}

namespace {

// The order in which accepted handshakes are dropped when no slot is left: smaller goes first.
// Idle ones (nothing received) oldest first, then those with part of a hello by how much came
// (then oldest), then those that received a whole hello, oldest first.
std::tuple<int, size_t, uint64_t> evictionRank(const Handshake& h, uint64_t order) {
  if (h.heardHello()) return {2, 0, order};
  if (h.received() == 0) return {0, 0, order};
  return {1, h.received(), order};
}

std::string describe(const Handshake& h) {
  const std::string got = h.heardHello()      ? std::string("a whole hello")
                          : h.received() == 0 ? std::string("nothing")
                                              : detail::concat(h.received(), " byte(s)");
  return h.from() + " (" + got + " received)";
}

}  // namespace

void Handshakes::release(const Handshake& h) {
  if (!h.dialing() && !h.evicted_) {
    --accepted_;
    --registry().accepted;
  }
}

void Handshakes::admit(std::unique_ptr<Handshake> handshake) {
  Registry& r = registry();
  handshake->order_ = ++r.order;
  if (r.accepted >= kMaxHandshakes) {
    // The victim over every set's accepted handshakes and this newcomer.
    Handshakes* victimSet = nullptr;
    size_t victimIndex = 0;
    auto best = evictionRank(*handshake, handshake->order_);
    for (Handshakes* set : r.sets) {
      for (size_t i = 0; i < set->running_.size(); ++i) {
        const Handshake& h = *set->running_[i];
        if (h.dialing() || h.evicted_ || h.status() != Handshake::Status::kRunning) continue;
        const auto rank = evictionRank(h, h.order_);
        if (rank < best) {
          best = rank;
          victimSet = set;
          victimIndex = i;
        }
      }
    }
    if (victimSet == nullptr) {
      XCCL_WARN_LIMITED(logs_.evicted, "tcp", kMaxHandshakes,
                        " accepted handshakes in flight in this process: dropped the newest "
                        "connection, from ",
                        describe(*handshake));
      return;  // closes it
    }
    XCCL_WARN_LIMITED(logs_.evicted, "tcp", kMaxHandshakes,
                      " accepted handshakes in flight in this process: dropped the one from ",
                      describe(*victimSet->running_[victimIndex]), " for a new connection");
    if (victimSet == this) {
      release(*running_[victimIndex]);
      running_.erase(running_.begin() + static_cast<long>(victimIndex));  // closes it
    } else {
      Handshake& victim = *victimSet->running_[victimIndex];
      victim.evicted_ = true;
      ::shutdown(victim.fd(), SHUT_RDWR);
      --victimSet->accepted_;
      --r.accepted;
    }
  }
  running_.push_back(std::move(handshake));
  ++accepted_;
  ++r.accepted;
}

void Handshakes::acceptSome(const Socket& listener,
                            std::vector<std::unique_ptr<Handshake>>* ended) {
  for (size_t i = 0; i < kAcceptsPerRound; ++i) {
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      const int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        // The connection stays queued and the listener readable: polling it now would spin.
        acceptPausedUntil_ = Clock::now() + kAcceptPause;
        rlimit limit{};
        ::getrlimit(RLIMIT_NOFILE, &limit);
        XCCL_WARN_LIMITED(logs_.noDescriptors, "tcp", "cannot accept connections: ", errnoText(err),
                          err == EMFILE ? detail::concat(" (this process may open ", limit.rlim_cur,
                                                         " descriptors: RLIMIT_NOFILE, ulimit -n)")
                          : err == ENFILE ? std::string(" (the system's limit: fs.file-max)")
                                          : std::string(),
                          "; not accepting for ", kAcceptPause.count(), " ms");
      }
      return;  // EAGAIN: none left; anything else: the next round tries again
    }
    Socket s(fd);
    s.setNoDelay();
    auto h = std::make_unique<Handshake>(std::move(s), terms_, Clock::now() + kHandshakeTimeout);
    // A real dialer's offer is usually there already: a handshake that got it never competes
    // with idle strangers for a slot on equal terms.
    if (h->advance() != Handshake::Status::kRunning) {
      ended->push_back(std::move(h));
      continue;
    }
    admit(std::move(h));
  }
}

std::vector<std::unique_ptr<Handshake>> Handshakes::poll(const std::vector<Socket>& listeners,
                                                         std::chrono::milliseconds wait) {
  std::vector<pollfd> fds;
  auto now = Clock::now();
  const bool paused = now < acceptPausedUntil_;
  if (paused) {
    wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(acceptPausedUntil_ -
                                                                                now) +
                              std::chrono::milliseconds(1));
  }
  // A paused listener is left out (poll skips negative descriptors).
  for (const Socket& l : listeners) fds.push_back({paused ? -1 : l.fd(), POLLIN, 0});
  for (const auto& h : running_) {
    fds.push_back({h->fd(), h->events(), 0});
    wait = std::min(wait, std::max(std::chrono::milliseconds(0),
                                   std::chrono::duration_cast<std::chrono::milliseconds>(
                                       h->deadline() - now)));
  }
  const int n = ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
  std::vector<std::unique_ptr<Handshake>> ended;
  now = Clock::now();
  std::lock_guard<std::mutex> guard(registry().mutex);
  // Handshakes under way first, then new connections.
  for (size_t i = 0; i < running_.size();) {
    Handshake& h = *running_[i];
    if (h.evicted_) {
      h.fail(detail::concat("dropped: ", kMaxHandshakes,
                            " accepted handshakes were in flight in this process"));
    } else if (n > 0 && fds[listeners.size() + i].revents != 0) {
      h.advance();
    }
    if (h.status() == Handshake::Status::kRunning && now >= h.deadline()) h.expire();
    if (h.status() != Handshake::Status::kRunning) {
      release(h);
      ended.push_back(std::move(running_[i]));
      running_.erase(running_.begin() + static_cast<long>(i));
      fds.erase(fds.begin() + static_cast<long>(listeners.size() + i));
      continue;
    }
    ++i;
  }
  for (size_t i = 0; n > 0 && i < listeners.size(); ++i) {
    if (fds[i].fd >= 0 && fds[i].revents != 0) acceptSome(listeners[i], &ended);
  }
  return ended;
}

}  // namespace xccl::net::tcp
