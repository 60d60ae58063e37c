// The TCP listener against strangers: connections that send nothing, or half a handshake, to
// every rank's listener while the group is created and while a link is redialled. Neither may
// hold up the real peers' connections: the group forms and a link comes back about as fast as
// without them. Then the handshake set itself (handshake.h Handshakes): which connection is
// dropped when no slot is left, the process-wide cap, accepts per round, and running out of
// descriptors.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "harness.h"
#include "net/transport/tcp/handshake.h"
#include "net/transport/tcp/interfaces.h"

namespace xccl {
namespace {

using net::tcp::TcpTransport;
using Ms = std::chrono::milliseconds;

// Connects `idle` connections that never send a byte and one that sends half a handshake's
// worth of bytes and then nothing. Kept open by the caller.
void connectStrangers(const net::tcp::Address& to, int idle, std::vector<int>* fds) {
  for (int i = 0; i <= idle; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&to.storage), to.length), 0);
    fds->push_back(fd);
    if (i == idle) {
      const uint8_t half[40] = {0x48, 0x4c, 0x43, 0x58};  // the hello magic, then zeros
      ASSERT_EQ(::send(fd, half, sizeof(half), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(half)));
    }
  }
}

// A store that, when a rank publishes its listening addresses, first connects strangers to
// them: they are in the listener's queue before any peer can know where to dial.
class StrangerStore final : public net::Store {
 public:
  explicit StrangerStore(int idle) : idle_(idle) {}
  ~StrangerStore() override {
    for (int fd : fds_) ::close(fd);
  }
  void set(const std::string& key, const net::Bytes& value) override {
    const size_t at = key.rfind("/addr/");
    if (at != std::string::npos && key.find('/', at + 6) == std::string::npos) {
      bool named;
      const auto interfaces = net::tcp::parseInterfaces(net::toString(value), &named);
      std::lock_guard<std::mutex> guard(mutex_);
      for (const auto& it : interfaces) connectStrangers(it.address, idle_, &fds_);
      ++strangersFor_;
    }
    inner_.set(key, value);
  }
  net::Bytes get(const std::string& key, Ms timeout) override { return inner_.get(key, timeout); }
  int64_t add(const std::string& key, int64_t delta) override { return inner_.add(key, delta); }
  int strangersFor() {
    std::lock_guard<std::mutex> guard(mutex_);
    return strangersFor_;
  }

 private:
  const int idle_;
  net::MemoryStore inner_;
  std::mutex mutex_;
  std::vector<int> fds_;
  int strangersFor_ = 0;
};

net::tcp::TcpOptions options(const std::string& prefix, Ms meshTimeout) {
  net::tcp::TcpOptions o = testing::loopbackOptions(prefix);
  o.timeout = meshTimeout;
  o.streams = 2;
  o.linkTimeout = Ms(5000);
  return o;
}

// Creates a group of `size` over `store`; returns how long the slowest rank took.
Ms createGroup(net::Store& store, int size, const net::tcp::TcpOptions& o) {
  std::atomic<int64_t> slowest{0};
  testing::runThreads(size, [&](int rank) {
    const auto start = net::Clock::now();
    TcpTransport transport(store, rank, size, o);
    const auto took = std::chrono::duration_cast<Ms>(net::Clock::now() - start).count();
    int64_t seen = slowest.load();
    while (took > seen && !slowest.compare_exchange_weak(seen, took)) {
    }
    // Every pair still talks.
    std::vector<int> in(size, -1);
    std::vector<net::RequestPtr> requests;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      requests.push_back(transport.isend(peer, testing::p2pTag(1), &rank, sizeof(rank)));
      requests.push_back(transport.irecv(peer, testing::p2pTag(1), &in[peer], sizeof(int)));
    }
    transport.wait(requests, testing::soon(), "exchange");
    for (int peer = 0; peer < size; ++peer) {
      if (peer != rank) {
        EXPECT_EQ(in[peer], peer);
      }
    }
  });
  return Ms(slowest.load());
}

TEST(TcpListener, IdleStrangersDoNotStallGroupCreation) {
  // The mesh deadline is 30 s: a listener that waits for a stranger's handshake until then
  // misses it by far. Without strangers a group of 3 forms in well under a second here.
  const Ms meshTimeout(30000);
  for (int idle : {1, 3}) {
    StrangerStore store(idle);
    const Ms took = createGroup(store, 3, options("strangers" + std::to_string(idle), meshTimeout));
    EXPECT_EQ(store.strangersFor(), 3);
    EXPECT_LT(took.count(), meshTimeout.count() / 6) << idle << " idle stranger(s) per listener";
  }
}

TEST(TcpListener, IdleStrangersDoNotStallARedial) {
  net::MemoryStore store;
  const auto o = options("redial-strangers", Ms(30000));
  std::atomic<int64_t> backAfterMs{-1};
  testing::runThreads(2, [&](int rank) {
    TcpTransport t(store, rank, 2, o);
    std::vector<int> fds;
    if (rank == 0) {
      // Strangers on rank 0's listener (rank 1 dials rank 0), then a link of rank 1's killed:
      // rank 1 redials it through the same listener.
      connectStrangers(net::tcp::Address::parse(t.listenAddress()), 3, &fds);
      std::this_thread::sleep_for(Ms(100));  // the manager has seen them
      const auto start = net::Clock::now();
      t.killLink(1, 0);
      const auto limit = start + Ms(20000);
      while (net::Clock::now() < limit &&
             !(t.linkCounters(1, 0).up && t.linkCounters(1, 0).recoveries >= 1)) {
        std::this_thread::sleep_for(Ms(10));
      }
      backAfterMs = std::chrono::duration_cast<Ms>(net::Clock::now() - start).count();
    }
    // Both ranks stay until the link is back (or the test gave up), then talk once more.
    int token = rank, got = -1;
    auto send = t.isend(1 - rank, testing::p2pTag(2), &token, sizeof(token));
    auto recv = t.irecv(1 - rank, testing::p2pTag(2), &got, sizeof(got));
    t.wait({send, recv}, testing::soon(30000), "after the redial");
    EXPECT_EQ(got, 1 - rank);
    for (int fd : fds) ::close(fd);
  });
  // The link timeout is 5 s: a manager that waits that long for even one stranger's handshake
  // brings the link back after 5 s at best; without strangers it is back within milliseconds.
  EXPECT_GE(backAfterMs.load(), 0);
  EXPECT_LT(backAfterMs.load(), 3000);
}

// A store for one rank (all ranks share `inner`) that, when this rank reads `key`, first runs
// `before` (e.g. waits, or does something to this rank's listener meanwhile).
class HookStore final : public net::Store {
 public:
  HookStore(net::Store& inner, std::string key, std::function<void()> before)
      : inner_(inner), key_(std::move(key)), before_(std::move(before)) {}
  void set(const std::string& key, const net::Bytes& value) override {
    if (key.size() > 7 && key.compare(key.size() - 7, 7, "/addr/0") == 0) {
      bool named;
      listen_ = net::tcp::parseInterfaces(net::toString(value), &named).at(0).address;
    }
    inner_.set(key, value);
  }
  net::Bytes get(const std::string& key, Ms timeout) override {
    if (before_ && key.size() >= key_.size() &&
        key.compare(key.size() - key_.size(), key_.size(), key_) == 0) {
      std::exchange(before_, nullptr)();
    }
    return inner_.get(key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override { return inner_.add(key, delta); }
  const net::tcp::Address& listenAddress() const { return listen_; }

 private:
  net::Store& inner_;
  const std::string key_;
  std::function<void()> before_;
  net::tcp::Address listen_;
};

// The listening socket of this process bound to `address` (the transport's own).
int listenerAt(const net::tcp::Address& address) {
  for (int fd = 0; fd < 65536; ++fd) {
    int listening = 0;
    socklen_t len = sizeof(listening);
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    net::tcp::Address a;
    a.length = sizeof(a.storage);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length) == 0 &&
        a.toString() == address.toString()) {
      return fd;
    }
  }
  return -1;
}

// Rank 0 of two is held up (as if descheduled) after rank 1 dialled it; `meanwhile` runs then,
// with rank 0's listening address. The group must still form, and talk.
void createWhileRank0IsHeldUp(const std::string& prefix,
                              const std::function<void(const net::tcp::Address&)>& meanwhile) {
  net::MemoryStore inner;
  std::unique_ptr<HookStore> stores[2];
  stores[1] = std::make_unique<HookStore>(inner, "", nullptr);
  stores[0] = std::make_unique<HookStore>(inner, prefix + "/addr/1", [&] {
    // Rank 1 published its addresses just before it reads rank 0's and dials.
    inner.get(prefix + "/addr/1", Ms(10000));
    std::this_thread::sleep_for(Ms(300));
    meanwhile(stores[0]->listenAddress());
  });
  auto o = options(prefix, Ms(20000));
  o.streams = 1;
  testing::runThreads(2, [&](int rank) {
    TcpTransport t(*stores[rank], rank, 2, o);
    int mine = rank, got = -1;
    auto s = t.isend(1 - rank, testing::p2pTag(5), &mine, sizeof(mine));
    auto r = t.irecv(1 - rank, testing::p2pTag(5), &got, sizeof(got));
    t.wait({s, r}, testing::soon(), "exchange");
    EXPECT_EQ(got, 1 - rank);
  });
}

TEST(TcpListener, ARealDialSurvivesABurstOfStrangersBehindIt) {
  // 300 idle connections queue behind rank 1's dial while rank 0 is held up: more than there are
  // handshake slots, so something is dropped; never the dial whose offer came.
  std::vector<int> fds;
  createWhileRank0IsHeldUp("burst", [&](const net::tcp::Address& at) {
    for (int i = 0; i < 300; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&at.storage), at.length), 0);
      fds.push_back(fd);
    }
  });
  for (int fd : fds) ::close(fd);
}

TEST(TcpListener, ADialResetDuringCreationIsRetried) {
  // Rank 0's first connection from rank 1 is accepted and closed unread (a reset, as when it was
  // dropped): rank 1 dials again instead of failing the group.
  createWhileRank0IsHeldUp("reset", [&](const net::tcp::Address& at) {
    const int listener = listenerAt(at);
    ASSERT_GE(listener, 0);
    pollfd pfd{listener, POLLIN, 0};
    ASSERT_EQ(::poll(&pfd, 1, 5000), 1);
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(fd, 0);
    ::close(fd);
  });
}

using net::tcp::Handshake;
using net::tcp::Handshakes;
using net::tcp::kAcceptsPerRound;
using net::tcp::kMaxHandshakes;

// A listener on loopback and a handshake set over it, as rank 0 of a group of two.
struct Acceptor {
  net::tcp::HandshakeTerms terms;
  net::tcp::HandshakeLogs logs;
  net::tcp::Address address;
  std::vector<net::tcp::Socket> listeners;
  std::unique_ptr<Handshakes> set;
  std::vector<std::unique_ptr<Handshake>> ended;
  Acceptor() {
    std::memset(terms.key, 7, sizeof(terms.key));
    net::tcp::groupId("listener", "t", terms.group);
    terms.self = 0;
    terms.links = {0, 1};
    listeners.push_back(net::tcp::listenOn(net::tcp::Address::parse("127.0.0.1:0"), &address));
    set = std::make_unique<Handshakes>(terms, logs);
  }
  // The terms of rank 1 of the same group.
  net::tcp::HandshakeTerms dialerTerms() const {
    net::tcp::HandshakeTerms t = terms;
    t.self = 1;
    t.links = {1, 0};
    return t;
  }
  void poll(Ms wait = Ms(0)) {
    for (auto& h : set->poll(listeners, wait)) ended.push_back(std::move(h));
  }
  // Polls until nothing is left to accept (a round that accepts nothing after a wait).
  void drain() {
    for (int quiet = 0; quiet < 5;) {
      const size_t before = set->accepted() + ended.size();
      poll(Ms(20));
      quiet = set->accepted() + ended.size() == before ? quiet + 1 : 0;
    }
  }
  int connect(const uint8_t* send = nullptr, size_t bytes = 0) const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&address.storage), address.length),
              0);
    if (bytes > 0) {
      EXPECT_EQ(::send(fd, send, bytes, MSG_NOSIGNAL), static_cast<ssize_t>(bytes));
    }
    return fd;
  }
};

// Whether the other end closed `fd` (what it sent first is read and dropped).
bool closedByAcceptor(int fd) {
  uint8_t sink[256];
  for (;;) {
    const ssize_t n = ::recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
    if (n > 0) continue;
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }
}

TEST(TcpHandshakes, IdleStrangersAreDroppedBeforeHandshakesThatMadeProgress) {
  ASSERT_EQ(Handshakes::acceptedInProcess(), 0u);
  Acceptor a;
  // A real dialer (its offer goes out at once), and a stranger that sent part of a hello.
  const net::tcp::HandshakeTerms dialer = a.dialerTerms();  // the handshake keeps a reference
  Handshake dial(net::tcp::connectTo(a.address, testing::soon()), dialer, 0, 0, testing::soon());
  ASSERT_EQ(dial.advance(), Handshake::Status::kRunning);
  const uint8_t part[10] = {0x48, 0x4c, 0x43, 0x58};
  const int partial = a.connect(part, sizeof(part));
  a.drain();
  ASSERT_EQ(a.set->accepted(), 2u);
  // More idle strangers than there are slots left: the oldest idle ones are dropped, a few lines
  // say so (the rest are counted, not logged).
  ::testing::internal::CaptureStderr();
  std::vector<int> idle;
  const size_t extra = 50;
  for (size_t i = 0; i < kMaxHandshakes - 2 + extra; ++i) idle.push_back(a.connect());
  a.drain();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(a.set->accepted(), kMaxHandshakes);
  EXPECT_EQ(Handshakes::acceptedInProcess(), kMaxHandshakes);
  for (size_t i = 0; i < idle.size(); ++i) {
    EXPECT_EQ(closedByAcceptor(idle[i]), i < extra) << "idle stranger " << i;
  }
  EXPECT_FALSE(closedByAcceptor(partial)) << "a partial hello was dropped before idle strangers";
  size_t lines = 0;
  for (size_t at = log.find("dropped the one from"); at != std::string::npos;
       at = log.find("dropped the one from", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, net::tcp::HandshakeLogs::kBurst) << log;
  // The real dialer's handshake is still there: it completes.
  net::tcp::finishDial(dial, "rank 0");
  for (int i = 0; i < 100 && a.ended.empty(); ++i) a.poll(Ms(20));
  ASSERT_EQ(a.ended.size(), 1u);
  EXPECT_EQ(a.ended[0]->status(), Handshake::Status::kDone) << a.ended[0]->why();
  EXPECT_EQ(a.ended[0]->peer(), 1);
  for (int fd : idle) ::close(fd);
  ::close(partial);
}

TEST(TcpHandshakes, TheCapIsPerProcessAcrossGroups) {
  ASSERT_EQ(Handshakes::acceptedInProcess(), 0u);
  Acceptor first, second;
  std::vector<int> fds;
  for (size_t i = 0; i < 200; ++i) fds.push_back(first.connect());
  first.drain();
  ASSERT_EQ(first.set->accepted(), 200u);
  for (size_t i = 0; i < 200; ++i) fds.push_back(second.connect());
  second.drain();
  // Together no more than the cap; the oldest idle ones (the first group's) made room.
  EXPECT_EQ(Handshakes::acceptedInProcess(), kMaxHandshakes);
  EXPECT_EQ(second.set->accepted(), 200u);
  EXPECT_EQ(first.set->accepted(), kMaxHandshakes - 200);
  first.poll(Ms(100));  // the first group drops what the second evicted
  EXPECT_EQ(first.ended.size(), 400 - kMaxHandshakes);
  for (const auto& h : first.ended) {
    EXPECT_NE(h->why().find("dropped"), std::string::npos) << h->why();
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    EXPECT_EQ(closedByAcceptor(fds[i]), i < 400 - kMaxHandshakes) << "stranger " << i;
  }
  for (int fd : fds) ::close(fd);
  first.set.reset();
  EXPECT_EQ(Handshakes::acceptedInProcess(), 200u);
}

TEST(TcpHandshakes, AcceptsAreBoundedPerRound) {
  Acceptor a;
  std::vector<int> fds;
  for (size_t i = 0; i < 3 * kAcceptsPerRound; ++i) fds.push_back(a.connect());
  a.poll(Ms(1000));
  EXPECT_EQ(a.set->accepted(), kAcceptsPerRound);
  a.poll(Ms(1000));
  EXPECT_EQ(a.set->accepted(), 2 * kAcceptsPerRound);
  for (int fd : fds) ::close(fd);
}

TEST(TcpHandshakes, RunningOutOfDescriptorsPausesTheListenerInsteadOfSpinning) {
  Acceptor a;
  std::vector<int> fds;
  for (int i = 0; i < 5; ++i) fds.push_back(a.connect());
  ::testing::internal::CaptureStderr();
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  // Every descriptor below the lowered limit taken: accept fails with EMFILE.
  int highest = 0;
  for (int fd = 0; fd < 65536; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0) highest = fd;
  }
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(highest) + 1;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> fillers;
  for (int fd; (fd = ::dup(a.listeners[0].fd())) >= 0;) fillers.push_back(fd);
  int rounds = 0;
  const auto until = net::Clock::now() + Ms(300);
  while (net::Clock::now() < until) {
    a.poll(Ms(20));
    ++rounds;
  }
  for (int fd : fillers) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(a.set->accepted(), 0u);
  // A spinning poll would run thousands of rounds in 300 ms; 20 ms rounds run about 15.
  EXPECT_LT(rounds, 40);
  EXPECT_NE(log.find("cannot accept connections"), std::string::npos) << log;
  EXPECT_NE(log.find("RLIMIT_NOFILE"), std::string::npos) << log;
  size_t lines = 0;
  for (size_t at = log.find("cannot accept"); at != std::string::npos;
       at = log.find("cannot accept", at + 1)) {
    ++lines;
  }
  EXPECT_LE(lines, net::tcp::HandshakeLogs::kBurst) << log;
  // With descriptors again, the queued connections are accepted.
  for (int i = 0; i < 20 && a.set->accepted() < 5; ++i) a.poll(Ms(20));
  EXPECT_EQ(a.set->accepted(), 5u);
  for (int fd : fds) ::close(fd);
}

}  // namespace
}  // namespace xccl
