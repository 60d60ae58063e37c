#include "net/transport/tcp/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/env.h"
#include "common/logging.h"

namespace xccl::net::tcp {
namespace {

int millisUntil(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

// Waits for `events` on fd; throws kTimeout at the deadline.
void pollFor(int fd, short events, Deadline deadline, const char* what) {
  for (;;) {
    pollfd pfd{fd, events, 0};
    int rc = ::poll(&pfd, 1, millisUntil(deadline));
    if (rc > 0) return;
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) detail::throwSystemError(__FILE__, __LINE__, what, errno);
    XCCL_THROW(ErrorKind::kTimeout, what, " timed out");
  }
}

}  // namespace

Socket::~Socket() { close(); }

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

int Socket::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::setNonBlocking() {
  int flags = XCCL_SYSCHECK(::fcntl(fd_, F_GETFL), "fcntl(F_GETFL)");
  XCCL_SYSCHECK(::fcntl(fd_, F_SETFL, flags | O_NONBLOCK), "fcntl(F_SETFL)");
}

void Socket::setNoDelay() {
  int one = 1;
  XCCL_SYSCHECK(::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), "TCP_NODELAY");
}

void Socket::sendAll(const void* data, size_t bytes, Deadline deadline) {
  auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd_, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollFor(fd_, POLLOUT, deadline, "socket send");
    } else if (n < 0 && errno != EINTR) {
      detail::throwSystemError(__FILE__, __LINE__, "send", errno);
    }
  }
}

void Socket::recvAll(void* data, size_t bytes, Deadline deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd_, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
    } else if (n == 0) {
      XCCL_THROW(ErrorKind::kPeerFailure, "connection closed by peer during handshake");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollFor(fd_, POLLIN, deadline, "socket receive");
    } else if (errno != EINTR) {
      detail::throwSystemError(__FILE__, __LINE__, "recv", errno);
    }
  }
}

void tuneSocket(Socket& socket) {
  socket.setNoDelay();
  constexpr int kBuffer = 4 << 20;
  static const bool allowed = [] {
    auto atLeast = [](const char* path) {
      std::ifstream in(path);
      int64_t value = 0;
      return static_cast<bool>(in >> value) && value >= kBuffer;
    };
    return atLeast("/proc/sys/net/core/wmem_max") && atLeast("/proc/sys/net/core/rmem_max");
  }();
  if (!allowed) return;
  // Best effort: a refusal leaves the kernel's autotuned buffers.
  ::setsockopt(socket.fd(), SOL_SOCKET, SO_SNDBUF, &kBuffer, sizeof(kBuffer));
  ::setsockopt(socket.fd(), SOL_SOCKET, SO_RCVBUF, &kBuffer, sizeof(kBuffer));
}

Socket listenOn(const Address& host, Address* bound) {
  const auto* sa = reinterpret_cast<const sockaddr*>(&host.storage);
  Socket s(XCCL_SYSCHECK(::socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket"));
  Address any = host;
  if (sa->sa_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&any.storage)->sin6_port = 0;
  } else {
    reinterpret_cast<sockaddr_in*>(&any.storage)->sin_port = 0;
  }
  XCCL_SYSCHECK(::bind(s.fd(), reinterpret_cast<sockaddr*>(&any.storage), any.length),
                "bind " + host.toString());
  XCCL_SYSCHECK(::listen(s.fd(), 4096), "listen");
  bound->length = sizeof(bound->storage);
  XCCL_SYSCHECK(::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&bound->storage), &bound->length),
                "getsockname");
  s.setNonBlocking();
  return s;
}

bool bindSource(int fd, const Address& from) {
  Address any = from;
  auto* sa = reinterpret_cast<sockaddr*>(&any.storage);
  if (sa->sa_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(sa)->sin6_port = 0;
  } else {
    reinterpret_cast<sockaddr_in*>(sa)->sin_port = 0;
  }
  return ::bind(fd, sa, any.length) == 0;
}

Socket connectTo(const Address& peer, Deadline deadline, const Address* from) {
  auto backoff = std::chrono::milliseconds(1);
  for (;;) {
    const auto* sa = reinterpret_cast<const sockaddr*>(&peer.storage);
    Socket s(XCCL_SYSCHECK(::socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0), "socket"));
    s.setNonBlocking();
    if (from != nullptr && !bindSource(s.fd(), *from)) {
      XCCL_THROW(ErrorKind::kPeerFailure, "cannot bind to ", from->toString(), " to connect to ",
                 peer.toString(), ": ", errnoText(errno));
    }
    int rc = ::connect(s.fd(), sa, peer.length);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollFor(s.fd(), POLLOUT, deadline, ("connect to " + peer.toString()).c_str());
      socklen_t len = sizeof(err);
      XCCL_SYSCHECK(::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len), "getsockopt");
    }
    if (err == 0) {
      s.setNoDelay();
      return s;
    }
    if ((err != ECONNREFUSED && err != ETIMEDOUT && err != EINTR) || Clock::now() >= deadline) {
      XCCL_THROW(ErrorKind::kPeerFailure, "cannot connect to ", peer.toString(), ": ",
                 errnoText(err));
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
}

Socket startConnect(const Address& peer, const Address* from, int* error, bool* bindFailed) {
  *error = 0;
  *bindFailed = false;
  const auto* sa = reinterpret_cast<const sockaddr*>(&peer.storage);
  Socket s(::socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) {
    *error = errno;
    return {};
  }
  if (from != nullptr && !bindSource(s.fd(), *from)) {
    *error = errno;
    *bindFailed = true;
    return {};
  }
  if (::connect(s.fd(), sa, peer.length) != 0 && errno != EINPROGRESS) {
    *error = errno;
    return {};
  }
  s.setNoDelay();
  return s;
}

Socket acceptOne(const Socket& listener, Deadline deadline) {
  for (;;) {
    int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      Socket s(fd);
      s.setNoDelay();
      return s;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollFor(listener.fd(), POLLIN, deadline, "accepting peer connections");
    } else if (errno != EINTR && errno != ECONNABORTED) {
      detail::throwSystemError(__FILE__, __LINE__, "accept", errno);
    }
  }
}

Socket acceptAny(const std::vector<Socket>& listeners, Deadline deadline) {
  if (listeners.size() == 1) return acceptOne(listeners[0], deadline);
  std::vector<pollfd> fds;
  for (const Socket& l : listeners) fds.push_back({l.fd(), POLLIN, 0});
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      XCCL_THROW(ErrorKind::kTimeout, "timed out accepting peer connections");
    }
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) detail::throwSystemError(__FILE__, __LINE__, "poll", errno);
    for (size_t i = 0; n > 0 && i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      int fd = ::accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        Socket s(fd);
        s.setNoDelay();
        return s;
      }
    }
  }
}

std::vector<std::string> linkIfnames(const std::vector<std::string>& netIfnames) {
  if (!netIfnames.empty()) return netIfnames;
  const std::string name = socketIfname();
  return name.empty() ? std::vector<std::string>{} : std::vector<std::string>{name};
}

}  // namespace xccl::net::tcp
