#include "net/transport/tcp/transport.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/env.h"
#include "common/logging.h"

namespace xccl::net::tcp {

TcpTransport::Settings TcpTransport::settingsFor(int rank, int size, const TcpOptions& options) {
  XCCL_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "bad rank ", rank, " of ", size);
  Settings settings;
  settings.streams =
      options.streams > 0 ? options.streams : static_cast<int>(env::getInt("XCCL_NET_STREAMS"));
  settings.linkTimeout = options.linkTimeout.count() > 0
                             ? options.linkTimeout
                             : std::chrono::milliseconds(env::getInt("XCCL_NET_LINK_TIMEOUT_MS"));
  settings.peerTimeout = options.timeout;
  settings.maxUnexpectedBytes =
      options.maxUnexpectedBytes > 0
          ? options.maxUnexpectedBytes
          : static_cast<uint64_t>(env::getInt("XCCL_NET_MAX_UNEXPECTED_BYTES"));
  return settings;
}

TcpTransport::TcpTransport(Store& store, int rank, int size, const TcpOptions& options)
    : TransportBase(rank, size),
      peers_(size),
      settings_(settingsFor(rank, size, options)),
      progress_(peers_, settings_.linkTimeout, settings_.peerTimeout, stopping_, receiver_, sender_,
                *this),
      epollFd_(progress_.epollFd()),
      sender_(epollFd_),
      writes_(rank, size, peers_, mutex_, completed_, health_, signals_, sender_, *this),
      receiver_(peers_, settings_.maxUnexpectedBytes, mutex_, completed_, sender_, writes_, *this),
      manager_(rank, size, settings_.streams, settings_.linkTimeout, peers_, stopping_, *this) {
  try {
    manager_.build(store, options);
  } catch (...) {
    peers_.clear();  // then the parts go, the progress loop closing its descriptors
    throw;
  }
  if (size_ == 1) return;
  progress_.start(options.progressCpus);
  manager_.start();
}

TcpTransport::~TcpTransport() {
  std::lock_guard<std::mutex> lifecycle(lifecycleMutex_);
  const bool running = progress_.running();
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
  peers_.clear();  // then the parts go, the progress loop closing its descriptors
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
  progress_.wake();
  progress_.join();
  manager_.join();
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

}  // namespace xccl::net::tcp
