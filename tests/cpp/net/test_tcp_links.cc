// TCP links: messages striped over several links per peer, and failover (a link killed or
// silently blackholed mid-transfer) without a lost, duplicated or reordered byte.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <numeric>
#include <random>

#include "harness.h"
#include "net/transport/tcp/wire.h"

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
  if (rank == 0) {
    EXPECT_GT(sentOn(t, 1, link), before);
  }
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
      // A stranger with the right address but another group's id.
      auto addr = net::tcp::Address::parse(t.listenAddress());
      net::tcp::Socket s = net::tcp::connectTo(addr, soon(5000));
      net::tcp::Hello hello;
      hello.rank = 1;
      net::tcp::groupId("foreign", "token", hello.group);
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

// Two "interfaces" on loopback (127.0.0.1 and 127.0.0.2, TcpOptions::localAddresses): links run
// over both, a large message's chunks travel on both, and one interface lost whole (all its
// links, held down) mid-transfer costs no byte; released, it is redialled and used again.
TEST(TcpLinks, TwoInterfacesShareChunksAndSurviveOneLost) {
  net::tcp::TcpOptions options = linkOptions(2, 1000, "nics");
  options.localAddresses = {net::tcp::Address::parse("127.0.0.1:0"),
                            net::tcp::Address::parse("127.0.0.2:0")};
  runLinked(2, options, [&](int rank, TcpTransport& t) {
    const int peer = 1 - rank;
    ASSERT_EQ(t.linkCount(peer), 4);
    auto onSecond = [&](int link) { return t.linkInterface(peer, link).find("127.0.0.2"); };
    for (int link = 0; link < 4; ++link) {
      EXPECT_EQ(onSecond(link) != std::string::npos, link >= 2) << t.linkInterface(peer, link);
    }
    auto sentOver = [&](int first) { return sentOn(t, 1, first) + sentOn(t, 1, first + 1); };
    transferWhile(t, rank, 1, [](int) {});
    if (rank == 0) {
      EXPECT_GT(sentOver(0), 0u);
      EXPECT_GT(sentOver(2), 0u);
    }
    transferWhile(t, rank, 2, [&](int round) {
      if (round != 0) return;
      t.killLink(1, 2, /*stayDown=*/true);
      t.killLink(1, 3, /*stayDown=*/true);
    });
    if (rank == 0) {
      EXPECT_GE(t.linkCounters(1, 2).failures, 1u);
      EXPECT_FALSE(t.linkCounters(1, 3).up);
      t.killLink(1, 2);  // released: the peer's redial is accepted again
      t.killLink(1, 3);
    }
    expectRecovered(t, rank, 2, net::Clock::now() + std::chrono::seconds(10));
  });
}

net::tcp::Interface iface(const std::string& name, const std::string& address, int prefixBits) {
  net::tcp::Interface out;
  out.name = name;
  out.address = net::tcp::Address::parse(address);
  out.mask = prefixBits == 0 ? 0 : ~uint32_t{0} << (32 - prefixBits);
  in_addr ip{};
  EXPECT_EQ(::inet_pton(AF_INET, address.substr(0, address.rfind(':')).c_str(), &ip), 1);
  out.network = ntohl(ip.s_addr) & out.mask;
  return out;
}

// Both ends compute the pairs alike from the published lists (interfaces.h).
TEST(TcpLinks, InterfacesPairBySubnetThenPosition) {
  using net::tcp::pairInterfaces;
  using Pairs = std::vector<std::pair<int, int>>;
  // Namespace hosts: xnet0 and xnet1 on two subnets, listed in another order on one end.
  const std::vector<net::tcp::Interface> host1 = {iface("xnet0", "10.231.0.2:1", 24),
                                                  iface("xnet1", "10.231.1.2:1", 24)};
  const std::vector<net::tcp::Interface> host0 = {iface("xnet1", "10.231.1.1:1", 24),
                                                  iface("xnet0", "10.231.0.1:1", 24)};
  EXPECT_EQ(pairInterfaces(host1, host0, true), (Pairs{{0, 1}, {1, 0}}));
  // Named lists on subnets that do not match: by position.
  const std::vector<net::tcp::Interface> a = {iface("ib0", "10.1.0.2:1", 24),
                                              iface("ib1", "10.2.0.2:1", 24)};
  const std::vector<net::tcp::Interface> b = {iface("ib0", "10.3.0.1:1", 24),
                                              iface("ib1", "10.4.0.1:1", 24)};
  EXPECT_EQ(pairInterfaces(a, b, true), (Pairs{{0, 0}, {1, 1}}));
  // Discovered: the first choices always; a bridge numbered alike on two hosts never.
  const std::vector<net::tcp::Interface> c = {iface("eth0", "10.0.0.2:1", 24),
                                              iface("docker0", "172.17.0.1:1", 16),
                                              iface("eth1", "10.9.0.2:1", 24)};
  const std::vector<net::tcp::Interface> d = {iface("eth0", "10.0.0.1:1", 24),
                                              iface("docker0", "172.17.0.1:1", 16),
                                              iface("eth1", "10.9.0.1:1", 24)};
  EXPECT_EQ(pairInterfaces(c, d, false), (Pairs{{0, 0}, {2, 2}}));
  // ...but between two ranks of one host (equal first addresses) every shared address pairs.
  EXPECT_EQ(pairInterfaces(c, c, false), (Pairs{{0, 0}, {1, 1}, {2, 2}}));
  // One interface each (a plain host): one pair, whatever the subnets.
  EXPECT_EQ(pairInterfaces({iface("eth0", "10.0.0.2:1", 24)}, {iface("en0", "10.5.0.1:1", 24)},
                           false),
            (Pairs{{0, 0}}));
  // The published text round-trips.
  bool named = false;
  const auto parsed = net::tcp::parseInterfaces(net::tcp::publishInterfaces(c, true), &named);
  ASSERT_EQ(parsed.size(), 3u);
  EXPECT_TRUE(named);
  EXPECT_EQ(parsed[1].name, "docker0");
  EXPECT_EQ(parsed[1].address.toString(), "172.17.0.1:1");
  EXPECT_EQ(parsed[1].mask, c[1].mask);
  EXPECT_EQ(parsed[2].network, c[2].network);
}

}  // namespace xccl
