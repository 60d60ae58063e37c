#include "net/tcp/transport.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>

#include "common/logging.h"
#include "common/thread_affinity.h"
#include "net/bootstrap.h"

namespace xccl::net::tcp {
namespace {

constexpr uint32_t kHelloMagic = 0x58434c48;  // "XCLH"

// First bytes on every connection: proves the connector belongs to this job (the secret came
// through the store) and says which rank it is.
struct Hello {
  uint32_t magic;
  int32_t rank;
  uint64_t secret;
};

Error peerClosed(int peer) {
  return Error(ErrorKind::kPeerFailure,
               detail::concat("rank ", peer,
                              " closed its connection (the process exited, was "
                              "killed, or aborted)"));
}

bool matches(int wantedPeer, const MessageTag& wantedTag, int peer, const MessageTag& tag) {
  return (wantedPeer == kAnySource || wantedPeer == peer) && wantedTag == tag;
}

Error sizeMismatch(int peer, const MessageTag& tag, size_t sent, size_t expected) {
  return Error(ErrorKind::kPeerFailure, detail::concat("rank ", peer, " sent ", sent, " bytes for ",
                                                       describe(tag), " where ", expected,
                                                       " were expected (the ranks called different "
                                                       "collectives, or with different sizes)"));
}

}  // namespace

TcpTransport::TcpTransport(Store& store, int rank, int size, const TcpOptions& options)
    : rank_(rank),
      size_(size),
      connections_(size),
      inflight_(size),
      peerError_(size),
      statusReplies_(size) {
  XCCL_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "bad rank ", rank, " of ", size);
  epollFd_ = XCCL_SYSCHECK(::epoll_create1(EPOLL_CLOEXEC), "epoll_create1");
  wakeFd_ = XCCL_SYSCHECK(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), "eventfd");
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u32 = UINT32_MAX;
  XCCL_SYSCHECK(::epoll_ctl(epollFd_, EPOLL_CTL_ADD, wakeFd_, &event), "epoll_ctl(ADD)");
  try {
    buildMesh(store, options);
  } catch (...) {
    connections_.clear();
    ::close(wakeFd_);
    ::close(epollFd_);
    throw;
  }
  progressThread_ = std::thread([this, cpus = options.progressCpus] {
    affinity::pinProgressThread(cpus, "tcp");  // never throws; unpinned when it cannot pin
    progressLoop();
  });
}

TcpTransport::~TcpTransport() {
  uint64_t one = 1;
  if (progressThread_.joinable()) {
    (void)!::write(wakeFd_, &one, sizeof(one));
    progressThread_.join();
  }
  connections_.clear();
  ::close(wakeFd_);
  ::close(epollFd_);
}

void TcpTransport::buildMesh(Store& store, const TcpOptions& options) {
  if (size_ == 1) return;
  const Deadline deadline = Clock::now() + options.timeout;
  const Bootstrap bootstrap =
      Bootstrap(store, options.storePrefix, rank_, size_, options.timeout).until(deadline);
  uint64_t secret = rank_ == 0 ? randomToken() : 0;
  const Bytes published = bootstrap.broadcast("secret", 0,
                                              Bytes(reinterpret_cast<uint8_t*>(&secret),
                                                    reinterpret_cast<uint8_t*>(&secret + 1)));
  XCCL_CHECK(published.size() == sizeof(secret), "bad secret in the store");
  std::memcpy(&secret, published.data(), sizeof(secret));

  Address bound;
  Socket listener = listenOn(options.listenAddress ? *options.listenAddress
                                                   : chooseListenAddress(options.storeHost),
                             &bound);
  XCCL_DEBUG("tcp", "listening on ", bound.toString());
  const std::vector<std::string> addresses = bootstrap.allGather("addr", bound.toString());

  // Lower ranks are dialled, higher ranks dial us: one connection per pair.
  std::vector<Socket> sockets(size_);
  for (int peer = 0; peer < rank_; ++peer) {
    auto addr = Address::parse(addresses[peer]);
    Socket s = connectTo(addr, deadline);
    Hello hello{kHelloMagic, rank_, secret};
    s.sendAll(&hello, sizeof(hello), deadline);
    Hello ack{};
    s.recvAll(&ack, sizeof(ack), deadline);
    if (ack.magic != kHelloMagic || ack.rank != peer || ack.secret != secret) {
      XCCL_THROW(ErrorKind::kPeerFailure, "the process at ", addr.toString(), " is not rank ", peer,
                 " of this group");
    }
    sockets[peer] = std::move(s);
  }
  for (int accepted = 0; accepted < size_ - 1 - rank_;) {
    Socket s = acceptOne(listener, deadline);
    Hello hello{};
    try {
      s.recvAll(&hello, sizeof(hello), deadline);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kTimeout) throw;
      continue;  // a stray connection that hung up
    }
    if (hello.magic != kHelloMagic || hello.secret != secret || hello.rank <= rank_ ||
        hello.rank >= size_ || sockets[hello.rank].valid()) {
      XCCL_WARN("tcp", "rejected a connection that does not belong to this group");
      continue;
    }
    Hello ack{kHelloMagic, rank_, secret};
    s.sendAll(&ack, sizeof(ack), deadline);
    sockets[hello.rank] = std::move(s);
    ++accepted;
  }
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) {
      connections_[peer] = std::make_unique<Connection>(peer, std::move(sockets[peer]), epollFd_);
    }
  }
}

void TcpTransport::progressLoop() {
  epoll_event events[64];
  std::vector<RequestPtr> completed;
  for (;;) {
    int n = ::epoll_wait(epollFd_, events, 64, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      failAll(Error(ErrorKind::kSystem, "epoll_wait failed: " + errnoText(errno)));
      return;
    }
    for (int i = 0; i < n; ++i) {
      uint32_t peer = events[i].data.u32;
      if (peer == UINT32_MAX) return;  // woken to stop
      Connection* conn = connections_[peer].get();
      try {
        if (events[i].events & EPOLLOUT) conn->flush(&completed);
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
          if (!conn->readAvailable(*this)) failPeer(peer, peerClosed(peer), false);
        }
      } catch (const Error& e) {
        failPeer(peer, e, false);
      }
      completeAll(completed);
      completed.clear();
    }
  }
}

FrameTarget TcpTransport::onHeader(int peer, const FrameHeader& header) {
  Inflight& slot = inflight_[peer];
  slot = Inflight{};
  if (header.type != FrameType::kData) {
    // Control frames carry short texts; a huge length means a corrupt or foreign peer.
    XCCL_CHECK(header.bytes <= (1u << 20), "control frame of ", header.bytes, " bytes from rank ",
               peer);
    slot.control.resize(header.bytes);
    return {slot.control.data()};
  }
  MessageTag tag{header.space, header.step, header.seq, header.op};
  std::lock_guard<std::mutex> guard(mutex_);
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if (!(it->request->peer() == kAnySource || it->request->peer() == peer)) continue;
    if (collectivesDiffer(it->request->tag(), tag)) {
      // The frame is discarded: this rank is not running the collective it belongs to.
      it->request->failLocked(collectiveMismatch(peer, it->request->tag(), tag));
      posted_.erase(it);
      completed_.notify_all();
      return {};
    }
    if (!matches(it->request->peer(), it->request->tag(), peer, tag)) continue;
    RequestPtr request = std::move(it->request);
    uint8_t* data = it->data;
    posted_.erase(it);
    if (request->bytes() != header.bytes) {
      request->failLocked(sizeMismatch(peer, tag, header.bytes, request->bytes()));
      completed_.notify_all();
      return {};
    }
    slot.request = std::move(request);
    return {data};
  }
  auto entry = std::make_shared<Unexpected>();
  entry->peer = peer;
  entry->tag = tag;
  entry->data.resize(header.bytes);
  unexpected_.push_back(entry);
  slot.unexpected = entry;
  return {entry->data.data()};
}

void TcpTransport::onPayload(int peer, const FrameHeader& header, const FrameTarget& target) {
  Inflight slot = std::move(inflight_[peer]);
  inflight_[peer] = Inflight{};
  std::string text(slot.control.begin(), slot.control.end());
  switch (header.type) {
    case FrameType::kData: break;
    case FrameType::kAbort:
      failPeer(peer,
               Error(ErrorKind::kPeerFailure,
                     detail::concat("rank ", peer, " aborted the communicator: ", text)),
               true);
      return;
    case FrameType::kStatusQuery: {
      std::function<std::string()> provider;
      {
        std::lock_guard<std::mutex> guard(mutex_);
        provider = statusProvider_;
      }
      sendControl(peer, FrameType::kStatusReply, header.seq, provider ? provider() : "");
      return;
    }
    case FrameType::kStatusReply: {
      std::lock_guard<std::mutex> guard(mutex_);
      if (header.seq == statusRound_) statusReplies_[peer] = text.empty() ? "?" : text;
      completed_.notify_all();
      return;
    }
    default:
      XCCL_THROW(ErrorKind::kPeerFailure, "rank ", peer, " sent an unknown frame type ",
                 static_cast<uint32_t>(header.type));
  }
  if (slot.request) {
    std::lock_guard<std::mutex> guard(mutex_);
    slot.request->completeLocked(peer);
    completed_.notify_all();
    return;
  }
  if (!slot.unexpected) return;  // discarded payload
  RequestPtr waiter;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    slot.unexpected->complete = true;
    waiter = slot.unexpected->waiter;
    if (waiter) unexpected_.remove(slot.unexpected);
  }
  if (waiter) deliverUnexpected(slot.unexpected, waiter, slot.unexpected->waiterData);
}

void TcpTransport::deliverUnexpected(const UnexpectedPtr& entry, const RequestPtr& request,
                                     uint8_t* data) {
  if (!entry->data.empty()) std::memcpy(data, entry->data.data(), entry->data.size());
  std::lock_guard<std::mutex> guard(mutex_);
  if (!request->done()) request->completeLocked(entry->peer);
  completed_.notify_all();
}

}  // namespace xccl::net::tcp
