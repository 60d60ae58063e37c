// TCP links: messages striped over several links per peer, and failover (a link killed or
// silently blackholed mid-transfer) without a lost, duplicated or reordered byte.
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <numeric>
#include <random>

#include "harness.h"
#include "net/tcp/wire.h"

namespace xccl {
namespace {

using net::MessageTag;
using net::TagSpace;
using net::tcp::TcpTransport;

MessageTag p2p(uint64_t tag) { return {TagSpace::kPointToPoint, 0, tag}; }
net::Deadline soon(int ms = 20000) { return net::Clock::now() + std::chrono::milliseconds(ms); }

net::tcp::TcpOptions linkOptions(int streams, int linkTimeoutMs, const std::string& prefix) {
  net::tcp::TcpOptions options = testing::loopbackOptions(prefix);
  options.streams = streams;
  options.linkTimeout = std::chrono::milliseconds(linkTimeoutMs);
  return options;
}

// Ranks as threads with TcpTransport (the hooks are not on the Transport interface).
void runLinked(int size, const net::tcp::TcpOptions& options,
               const std::function<void(int, TcpTransport&)>& body) {
  net::MemoryStore store;
  testing::runThreads(size, [&](int rank) {
    TcpTransport transport(store, rank, size, options);
    body(rank, transport);
  });
}

// A pattern that differs per byte, message and sender, so a misplaced chunk shows.
std::vector<uint8_t> pattern(size_t bytes, uint32_t seed) {
  std::vector<uint8_t> out(bytes);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : out) {
    x = x * 1664525u + 1013904223u;  // a cheap LCG: tests move hundreds of MiB
    b = static_cast<uint8_t>(x >> 24);
  }
  return out;
}

uint64_t sentOn(TcpTransport& t, int peer, int link) {
  return t.linkCounters(peer, link).chunksSent;
}

TEST(TcpLinks, StripedMessagesKeepFifoPerTagAndAnySource) {
  runLinked(3, linkOptions(3, 1000, "stripe"), [&](int rank, TcpTransport& t) {
    std::mt19937 gen(42);  // equal on every rank: senders and receivers agree on the sizes
    std::vector<size_t> sizes;
    for (int i = 0; i < 12; ++i)
      sizes.push_back(std::uniform_int_distribution<size_t>(0, 3 << 20)(gen));
    if (rank == 0) {
      // Receives posted for half the messages before they come, the rest after.
      std::vector<std::vector<uint8_t>> in(sizes.size());
      std::vector<net::RequestPtr> reqs;
      for (size_t i = 0; i < sizes.size(); ++i) {
        in[i].assign(sizes[i], 0);
        if (i % 2 == 0) reqs.push_back(t.irecv(1, p2p(5), in[i].data(), sizes[i]));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::vector<net::RequestPtr> later;
      for (size_t i = 1; i < sizes.size(); i += 2) {
        later.push_back(t.irecv(1, p2p(6), in[i].data(), sizes[i]));
      }
      t.wait(reqs, soon(), "even");
      t.wait(later, soon(), "odd");
      for (size_t i = 0; i < sizes.size(); ++i) {
        ASSERT_EQ(in[i], pattern(sizes[i], static_cast<uint32_t>(i))) << "message " << i;
      }
      std::vector<uint8_t> any(1 << 20);
      auto r = t.irecv(net::kAnySource, p2p(9), any.data(), any.size());
      t.wait({r}, soon(), "any");
      EXPECT_EQ(r->peer(), 2);
      EXPECT_EQ(any, pattern(any.size(), 99));
    } else if (rank == 1) {
      std::vector<std::vector<uint8_t>> out;
      std::vector<net::RequestPtr> reqs;
      for (size_t i = 0; i < sizes.size(); ++i)
        out.push_back(pattern(sizes[i], static_cast<uint32_t>(i)));
      for (size_t i = 0; i < sizes.size(); ++i) {
        reqs.push_back(t.isend(0, p2p(i % 2 == 0 ? 5 : 6), out[i].data(), sizes[i]));
      }
      t.wait(reqs, soon(), "sends");
      // Large messages went over every link.
      for (int link = 0; link < 3; ++link) EXPECT_GT(sentOn(t, 0, link), 0u) << "link " << link;
    } else {
      auto out = pattern(1 << 20, 99);
      t.wait({t.isend(0, p2p(9), out.data(), out.size())}, soon(), "send");
    }
  });
}

// Sends `rounds` messages of mixed sizes from rank 0 to 1 while `disturb` runs on rank 0 after
// the first round; rank 1 checks every byte. No request may fail.
void transferWhile(TcpTransport& t, int rank, int rounds, const std::function<void(int)>& disturb) {
  const size_t sizes[] = {8 << 20, 100, 3 << 20, 40000};
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < 4; ++i) {
      const uint32_t seed = static_cast<uint32_t>(round * 10 + i);
      if (rank == 0) {
        auto out = pattern(sizes[i], seed);
        auto s = t.isend(1, p2p(1), out.data(), out.size());
        if (i == 0) disturb(round);
        t.wait({s}, soon(), "send");
      } else {
        std::vector<uint8_t> in(sizes[i]);
        auto r = t.irecv(0, p2p(1), in.data(), in.size());
        t.wait({r}, soon(), "recv");
        ASSERT_EQ(in, pattern(sizes[i], seed)) << "round " << round << " message " << i;
      }
    }
  }
}

// After a disturbed transfer: on rank 0, `link` to rank 1 failed, was redialled (recovered by
// `until`) and carries chunks again; one more transfer on both ranks.
void expectRecovered(TcpTransport& t, int rank, int link, net::Clock::time_point until) {
  if (rank == 0) {
    while (t.linkCounters(1, link).recoveries == 0 && net::Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_GE(t.linkCounters(1, link).failures, 1u);
    ASSERT_GE(t.linkCounters(1, link).recoveries, 1u);
  }
  const uint64_t before = rank == 0 ? sentOn(t, 1, link) : 0;
  transferWhile(t, rank, 1, [](int) {});
  if (rank == 0) EXPECT_GT(sentOn(t, 1, link), before);
}

TEST(TcpLinks, KilledLinkLosesNothingAndComesBack) {
  runLinked(2, linkOptions(2, 1000, "kill"), [&](int rank, TcpTransport& t) {
    transferWhile(t, rank, 3, [&](int round) {
      if (round == 0) t.killLink(1, 0);  // mid-transfer: 8 MiB are on their way
    });
    expectRecovered(t, rank, 0, net::Clock::now() + std::chrono::seconds(10));
  });
}

TEST(TcpLinks, BlackholedLinkIsTakenDownAndRecovered) {
  const int timeoutMs = 200;
  runLinked(2, linkOptions(2, timeoutMs, "hole"), [&](int rank, TcpTransport& t) {
    const auto start = net::Clock::now();
    transferWhile(t, rank, 2, [&](int round) {
      if (round == 0) t.blackholeLink(1, 1);
    });
    // Down after the link timeout, redialled and up again soon after.
    expectRecovered(t, rank, 1, start + std::chrono::milliseconds(timeoutMs * 25));
  });
}

TEST(TcpLinks, NoLinkLeftFailsNamingThePeerAndLinks) {
  std::atomic<bool> done{false};
  runLinked(2, linkOptions(2, 200, "cut"), [&](int rank, TcpTransport& t) {
    if (rank == 1) {  // keeps redialling (refused) until rank 0 is finished
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return;
    }
    t.killLink(1, 0, /*stayDown=*/true);
    t.killLink(1, 1, /*stayDown=*/true);
    int v = 0;
    auto r = t.irecv(1, p2p(3), &v, sizeof(v));
    const auto start = net::Clock::now();
    try {
      t.wait({r}, net::Clock::now() + std::chrono::milliseconds(500), "recv");
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::kPeerFailure) << msg;
      EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
      EXPECT_NE(msg.find("link 0 ("), std::string::npos) << msg;
      EXPECT_NE(msg.find("link 1 ("), std::string::npos) << msg;
    }
    EXPECT_LT(net::Clock::now() - start, std::chrono::seconds(3));
    done = true;
  });
}

TEST(TcpLinks, ForeignHandshakeIsRefused) {
  std::atomic<bool> checked{false};
  runLinked(2, linkOptions(2, 1000, "foreign"), [&](int rank, TcpTransport& t) {
    if (rank == 0) {
      // A stranger with the right address but another group's nonce.
      auto addr = net::tcp::Address::parse(t.listenAddress());
      net::tcp::Socket s = net::tcp::connectTo(addr, soon(5000));
      net::tcp::Hello hello;
      hello.rank = 1;
      hello.group = net::tcp::hashGroup("foreign");
      hello.nonce = 12345;
      s.sendAll(&hello, sizeof(hello), soon(5000));
      char byte;
      EXPECT_THROW(s.recvAll(&byte, 1, soon(5000)), Error);  // closed without a reply
      checked = true;
    }
    while (!checked.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    transferWhile(t, rank, 1, [](int) {});  // the group's own links are untouched
    if (rank == 0) {
      EXPECT_EQ(t.linkCounters(1, 0).failures, 0u);
      EXPECT_EQ(t.linkCounters(1, 1).failures, 0u);
    }
  });
}

TEST(TcpLinks, LargeMessagesBothWaysAtOnce) {
  runLinked(2, linkOptions(2, 1000, "both"), [&](int rank, TcpTransport& t) {
    const size_t bytes = 32 << 20;
    const std::vector<uint8_t> out = pattern(bytes, rank), expected = pattern(bytes, 1 - rank);
    std::vector<uint8_t> in(bytes);
    for (int round = 0; round < 4; ++round) {
      auto r = t.irecv(1 - rank, {TagSpace::kCollective, 0, static_cast<uint64_t>(round)},
                       in.data(), bytes);
      auto s = t.isend(1 - rank, {TagSpace::kCollective, 0, static_cast<uint64_t>(round)},
                       out.data(), bytes);
      t.wait({r, s}, soon(20000), "exchange");
      ASSERT_EQ(in, expected);
    }
  });
}

// Many one- and two-chunk messages at once: their chunks overtake each other across links, so
// some arrive before their message's predecessors are known (stashed, then matched in order).
TEST(TcpLinks, ManyMessagesInFlightBothWays) {
  runLinked(2, linkOptions(2, 1000, "many"), [&](int rank, TcpTransport& t) {
    const size_t bytes = 700 << 10;
    const int count = 64;
    std::vector<std::vector<uint8_t>> out(count), in(count);
    for (int i = 0; i < count; ++i) {
      out[i].assign(bytes, static_cast<uint8_t>(i * 3 + rank));
      in[i].assign(bytes, 0);
    }
    for (int round = 0; round < 8; ++round) {
      std::vector<net::RequestPtr> reqs;
      for (int i = 0; i < count; ++i) {
        MessageTag tag{TagSpace::kCollective, static_cast<uint32_t>(i),
                       static_cast<uint64_t>(round)};
        if (i % 3 == 0) reqs.push_back(t.irecv(1 - rank, tag, in[i].data(), bytes));
        reqs.push_back(t.isend(1 - rank, tag, out[i].data(), bytes));
      }
      for (int i = 0; i < count; ++i) {
        MessageTag tag{TagSpace::kCollective, static_cast<uint32_t>(i),
                       static_cast<uint64_t>(round)};
        if (i % 3 != 0) reqs.push_back(t.irecv(1 - rank, tag, in[i].data(), bytes));
      }
      t.wait(reqs, soon(20000), "many");
      for (int i = 0; i < count; ++i)
        ASSERT_EQ(in[i][bytes - 1], static_cast<uint8_t>(i * 3 + 1 - rank));
    }
  });
}

TEST(TcpLinks, InterfaceNamesMustExist) {
  auto options = linkOptions(2, 1000, "ifnames");
  options.ifnames = {"lo"};
  runLinked(2, options, [&](int rank, TcpTransport& t) {
    EXPECT_EQ(t.listenAddress().rfind("127.", 0), 0u) << t.listenAddress();
    transferWhile(t, rank, 1, [](int) {});
  });
  options.ifnames = {"lo", "nosuch9"};
  net::MemoryStore store;
  try {
    TcpTransport transport(store, 0, 2, options);
    ADD_FAILURE() << "a missing interface was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << msg;
    EXPECT_NE(msg.find("'nosuch9'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("lo"), std::string::npos) << msg;  // the interfaces that exist
  }
}

}  // namespace
}  // namespace xccl
