#include "net/tcp/connection.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>

namespace xccl::net::tcp {
namespace {
constexpr size_t kDiscardChunk = 1 << 16;

// One non-blocking recv of up to `want` bytes from rank `peer`'s socket: the bytes read, 0 when
// the peer closed the connection, -1 when nothing is ready now. Retries EINTR; any other error
// throws.
ssize_t receiveSome(int fd, int peer, void* dest, size_t want) {
  for (;;) {
    const ssize_t n = ::recv(fd, dest, want, MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return -1;
    detail::throwSystemError(__FILE__, __LINE__, "receive from rank " + std::to_string(peer),
                             errno);
  }
}
}  // namespace

Connection::Connection(int peer, Socket socket, int epollFd)
    : peer_(peer), socket_(std::move(socket)), epollFd_(epollFd) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u32 = static_cast<uint32_t>(peer_);
  XCCL_SYSCHECK(::epoll_ctl(epollFd_, EPOLL_CTL_ADD, socket_.fd(), &event), "epoll_ctl(ADD)");
}

void Connection::watchWritableLocked(bool on) {
  if (on == watchingWritable_) return;
  epoll_event event{};
  event.events = on ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
  event.data.u32 = static_cast<uint32_t>(peer_);
  XCCL_SYSCHECK(::epoll_ctl(epollFd_, EPOLL_CTL_MOD, socket_.fd(), &event), "epoll_ctl(MOD)");
  watchingWritable_ = on;
}

void Connection::enqueue(const FrameHeader& header, const void* payload, RequestPtr request,
                         std::vector<RequestPtr>* completed) {
  std::lock_guard<std::mutex> guard(sendMutex_);
  if (closed_) XCCL_THROW(ErrorKind::kPeerFailure, "connection to rank ", peer_, " is closed");
  sendQueue_.push_back({header, static_cast<const uint8_t*>(payload), 0, std::move(request)});
  // Only the head of the queue may be written; later frames wait their turn.
  if (sendQueue_.size() == 1) flushLocked(completed);
}

void Connection::flush(std::vector<RequestPtr>* completed) {
  std::lock_guard<std::mutex> guard(sendMutex_);
  if (!closed_) flushLocked(completed);
}

void Connection::flushLocked(std::vector<RequestPtr>* completed) {
  while (!sendQueue_.empty()) {
    PendingSend& head = sendQueue_.front();
    const size_t total = sizeof(FrameHeader) + head.header.bytes;
    iovec iov[2];
    int count = 0;
    if (head.written < sizeof(FrameHeader)) {
      iov[count++] = {reinterpret_cast<uint8_t*>(&head.header) + head.written,
                      sizeof(FrameHeader) - head.written};
      if (head.header.bytes > 0)
        iov[count++] = {const_cast<uint8_t*>(head.payload), head.header.bytes};
    } else {
      size_t offset = head.written - sizeof(FrameHeader);
      iov[count++] = {const_cast<uint8_t*>(head.payload) + offset, head.header.bytes - offset};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    ssize_t n = ::sendmsg(socket_.fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return watchWritableLocked(true);
      detail::throwSystemError(__FILE__, __LINE__, "send to rank " + std::to_string(peer_), errno);
    }
    head.written += static_cast<size_t>(n);
    if (head.written < total) continue;
    if (head.request) completed->push_back(std::move(head.request));
    sendQueue_.pop_front();
  }
  watchWritableLocked(false);
}

bool Connection::readAvailable(FrameSink& sink) {
  for (;;) {
    if (!inPayload_) {
      const ssize_t n =
          receiveSome(socket_.fd(), peer_, reinterpret_cast<uint8_t*>(&readHeader_) + headerGot_,
                      sizeof(FrameHeader) - headerGot_);
      if (n == 0) return false;
      if (n < 0) return true;  // nothing more to read now
      headerGot_ += static_cast<size_t>(n);
      if (headerGot_ < sizeof(FrameHeader)) continue;
      headerGot_ = 0;
      if (readHeader_.magic != kFrameMagic) {
        XCCL_THROW(ErrorKind::kPeerFailure, "rank ", peer_, " sent a corrupt frame header");
      }
      target_ = sink.onHeader(peer_, readHeader_);
      payloadGot_ = 0;
      inPayload_ = true;
    }
    if (payloadGot_ < readHeader_.bytes) {
      size_t want = readHeader_.bytes - payloadGot_;
      uint8_t* dest = target_.data ? target_.data + payloadGot_ : nullptr;
      if (dest == nullptr) {
        discard_.resize(kDiscardChunk);
        want = std::min(want, kDiscardChunk);
        dest = discard_.data();
      }
      const ssize_t n = receiveSome(socket_.fd(), peer_, dest, want);
      if (n == 0) return false;
      if (n < 0) return true;
      payloadGot_ += static_cast<size_t>(n);
      if (payloadGot_ < readHeader_.bytes) continue;
    }
    inPayload_ = false;
    sink.onPayload(peer_, readHeader_, target_);
  }
}

std::vector<RequestPtr> Connection::closeSends(const std::string* abortReason) {
  std::lock_guard<std::mutex> guard(sendMutex_);
  bool wasOpen = !closed_;
  closed_ = true;
  bool atBoundary = sendQueue_.empty() || sendQueue_.front().written == 0;
  if (abortReason != nullptr && wasOpen && atBoundary) {
    FrameHeader header;
    header.type = FrameType::kAbort;
    header.bytes = abortReason->size();
    // Best effort and briefly bounded: the peer may be gone or not reading.
    auto deadline = Clock::now() + std::chrono::milliseconds(200);
    try {
      socket_.sendAll(&header, sizeof(header), deadline);
      socket_.sendAll(abortReason->data(), abortReason->size(), deadline);
    } catch (const Error&) {
    }
  }
  std::vector<RequestPtr> pending;
  for (auto& item : sendQueue_) {
    if (item.request) pending.push_back(std::move(item.request));
  }
  sendQueue_.clear();
  return pending;
}

void Connection::shutdownSocket() { ::shutdown(socket_.fd(), SHUT_RDWR); }

}  // namespace xccl::net::tcp
