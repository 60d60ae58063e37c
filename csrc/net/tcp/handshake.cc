#include "net/tcp/handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>

#include "common/logging.h"
#include "net/net_key.h"

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
      return fail(std::move(why));
    }
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

bool Handshakes::dialling(int peer, int link) const {
  return std::any_of(running_.begin(), running_.end(), [&](const auto& h) {
    return h->dialing() && h->peer() == peer && h->link() == link;
  });
}

void Handshakes::acceptAll(const Socket& listener) {
  for (;;) {
    const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: none left; anything else: the next poll tries again
    Socket s(fd);
    s.setNoDelay();
    size_t accepted = 0;
    for (const auto& h : running_) accepted += h->dialing() ? 0 : 1;
    if (accepted >= kMaxHandshakes) {
      const auto oldest = std::find_if(running_.begin(), running_.end(),
                                       [](const auto& h) { return !h->dialing(); });
      XCCL_WARN("tcp", kMaxHandshakes, " handshakes in flight: dropped the oldest, from ",
                (*oldest)->from());
      running_.erase(oldest);
    }
    running_.push_back(
        std::make_unique<Handshake>(std::move(s), terms_, Clock::now() + kHandshakeTimeout));
  }
}

std::vector<std::unique_ptr<Handshake>> Handshakes::poll(const std::vector<Socket>& listeners,
                                                         std::chrono::milliseconds wait) {
  std::vector<pollfd> fds;
  for (const Socket& l : listeners) fds.push_back({l.fd(), POLLIN, 0});
  auto now = Clock::now();
  for (const auto& h : running_) {
    fds.push_back({h->fd(), h->events(), 0});
    wait = std::min(wait, std::max(std::chrono::milliseconds(0),
                                   std::chrono::duration_cast<std::chrono::milliseconds>(
                                       h->deadline() - now)));
  }
  const int n = ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
  std::vector<std::unique_ptr<Handshake>> ended;
  now = Clock::now();
  for (size_t i = 0; i < running_.size();) {
    Handshake& h = *running_[i];
    if (n > 0 && fds[listeners.size() + i].revents != 0) h.advance();
    if (h.status() == Handshake::Status::kRunning && now >= h.deadline()) h.expire();
    if (h.status() != Handshake::Status::kRunning) {
      ended.push_back(std::move(running_[i]));
      running_.erase(running_.begin() + static_cast<long>(i));
      fds.erase(fds.begin() + static_cast<long>(listeners.size() + i));
      continue;
    }
    ++i;
  }
  for (size_t i = 0; n > 0 && i < listeners.size(); ++i) {
    if (fds[i].revents != 0) acceptAll(listeners[i]);
  }
  return ended;
}

}  // namespace xccl::net::tcp
