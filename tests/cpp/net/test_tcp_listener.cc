// The TCP listener against strangers: connections that send nothing, or half a handshake, to
// every rank's listener while the group is created and while a link is redialled. Neither may
// hold up the real peers' connections: the group forms and a link comes back about as fast as
// without them.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "harness.h"
#include "net/tcp/interfaces.h"

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

}  // namespace
}  // namespace xccl
