// The libfabric transport against failures and endpoints that do not follow its protocol: a send
// that fails before it is posted, a stranger's payload sent under a peer's tag, a member
// flooding headers ahead of their turn, headers claiming another sender, forged write
// completions, guessable keys, and (XCCL_NET_KEY_FILE) peers without the job's key.
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <fstream>
#include <future>
#include <thread>

#include "net/rendezvous/bootstrap.h"
#include "net/transport/ofi/fabric.h"
#include "net/transport/ofi/wire.h"
#include "ofi_harness.h"

namespace xccl::net::ofi {
namespace {

using testing::errorOf;
using testing::ofiP2p;
using testing::ofiSoon;
using Ofi = OfiTransport;

// A rank's published record is "<provider>\0<k or -><endpoint name>" (transport.cc): the name
// starts this far past the NUL.
constexpr size_t kNameOffset = 2;

// An endpoint outside the group on the same provider, aimed at one rank's endpoint (its name read
// from the store, where the ranks publish it): what anyone who can reach that endpoint can send
// it. member() makes one that joins the group's store exchanges as a rank instead, so the others
// put it in their address vectors: a member not following the protocol.
class RawEndpoint {
 public:
  RawEndpoint(net::Store& store, int target) {
    open();
    const net::Bytes record =
        store.get("ofi/addr/" + std::to_string(target), std::chrono::seconds(20));
    auto zero = std::find(record.begin(), record.end(), uint8_t{0});
    EXPECT_NE(zero, record.end());
    EXPECT_EQ(fi_av_insert(fabric_->av(), &*(zero + kNameOffset), 1, &addr_, 0, nullptr), 1);
  }
  // Rank `rank` of `size` (without a key file), its messages aimed at rank `target`.
  static std::unique_ptr<RawEndpoint> member(net::Store& store, int rank, int size, int target) {
    std::unique_ptr<RawEndpoint> raw(new RawEndpoint());
    raw->open();
    const net::Bootstrap bootstrap(store, "ofi", rank, size, std::chrono::seconds(20));
    raw->session_ = bootstrap.sharedToken("session");
    std::vector<uint8_t> name(256);
    size_t length = name.size();
    EXPECT_EQ(fi_getname(&raw->fabric_->ep()->fid, name.data(), &length), 0);
    net::Bytes mine(raw->fabric_->providerName(),
                    raw->fabric_->providerName() + std::strlen(raw->fabric_->providerName()) + 1);
    if (kNameOffset == 2) mine.push_back('-');
    mine.insert(mine.end(), name.begin(), name.begin() + length);
    const std::vector<net::Bytes> all = bootstrap.allGather("addr", mine);
    std::vector<uint8_t> table;
    for (const net::Bytes& record : all) {
      auto zero = std::find(record.begin(), record.end(), uint8_t{0});
      table.insert(table.end(), zero + kNameOffset, record.end());
    }
    std::vector<fi_addr_t> addresses(size);
    EXPECT_EQ(fi_av_insert(raw->fabric_->av(), table.data(), size, addresses.data(), 0, nullptr),
              size);
    raw->addr_ = addresses[target];
    bootstrap.allGather("inserted", net::Bytes{});
    return raw;
  }
  uint64_t session() const { return session_; }
  // A tagged message (copied; not waited for: a payload that nobody takes never completes).
  void send(uint64_t tag, std::vector<uint8_t> bytes) {
    buffers_.push_back(std::move(bytes));
    std::vector<uint8_t>& b = buffers_.back();
    retry([&](fi_context2* c) {
      return fi_tsend(fabric_->ep(), b.data(), b.size(), nullptr, addr_, tag, c);
    });
  }
  // An RMA write with remote CQ data `data` into the target's registration.
  void write(const net::RemoteRegion& region, uint64_t data) {
    buffers_.emplace_back(8, 0xab);
    std::vector<uint8_t>& b = buffers_.back();
    retry([&](fi_context2* c) {
      return fi_writedata(fabric_->ep(), b.data(), b.size(), nullptr, data, addr_, 0, region.key,
                          c);
    });
  }
  // Reads completions (errors too) until `count` arrived or two seconds passed.
  void drain(size_t count) {
    const auto end = net::Clock::now() + std::chrono::seconds(2);
    while (done_ < count && net::Clock::now() < end) poll();
  }

 private:
  template <typename Post>
  void retry(Post post) {
    contexts_.emplace_back();
    for (int i = 0; i < 2000; ++i) {
      const ssize_t ret = post(&contexts_.back());
      if (ret == 0) return;
      ASSERT_EQ(ret, -FI_EAGAIN) << fi_strerror(static_cast<int>(-ret));
      poll();
    }
    FAIL() << "the provider kept refusing a post";
  }
  void poll() {
    fi_cq_tagged_entry entry;
    const ssize_t n = fi_cq_read(fabric_->cq(), &entry, 1);
    if (n == 1) {
      ++done_;
    } else if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(fabric_->cq(), &err, 0) > 0) ++done_;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  RawEndpoint() = default;
  void open() {
    net::ofi::Choice choice =
        net::ofi::chooseProvider(testing::kLoopbackProvider, testing::ofiLoopbackOptions());
    fabric_ = std::make_unique<net::ofi::Fabric>(choice.info);
  }

  std::unique_ptr<net::ofi::Fabric> fabric_;
  fi_addr_t addr_ = FI_ADDR_NOTAVAIL;
  uint64_t session_ = 0;
  std::deque<std::vector<uint8_t>> buffers_;  // deques: elements stay put while ops use them
  std::deque<fi_context2> contexts_;
  size_t done_ = 0;
};

// A send that fails before it is posted (here its buffer's registration) takes no stream number:
// the peer does not wait for a message that never comes, and later sends still arrive.
TEST(OfiHostile, SendFailingAtRegistrationDoesNotHoldBackLaterOnes) {
  const size_t large = 3 * net::ofi::kEagerBytes;  // a payload of its own
  testing::runOfiRanks(2, [&](int rank, Ofi& t) {
    std::vector<uint8_t> small(16, 7), big(large, 9);
    if (rank == 0) {
      t.failNextRegistrations(1);
      const std::string error = errorOf(t, t.isend(1, ofiP2p(1), small.data(), small.size()));
      EXPECT_NE(error.find("fi_mr_reg failed"), std::string::npos) << error;
      t.wait({t.isend(1, ofiP2p(2), small.data(), small.size()),
              t.isend(1, ofiP2p(3), big.data(), big.size())},
             ofiSoon(5000), "later sends");
    } else {
      std::vector<uint8_t> a(16, 0), b(large, 0);
      t.wait({t.irecv(0, ofiP2p(2), a.data(), a.size()), t.irecv(0, ofiP2p(3), b.data(), b.size())},
             ofiSoon(5000), "later receives");
      EXPECT_EQ(a, small);
      EXPECT_EQ(b, big);
    }
  });
}

// A stranger sends a payload under rank 1's data tag before rank 1 sends its own: the receive
// for rank 1's payload takes rank 1's bytes, not the stranger's (FI_DIRECTED_RECV).
TEST(OfiHostile, PayloadReceivesTakeOnlyTheirSendersBytes) {
  const size_t large = 3 * net::ofi::kEagerBytes;
  net::MemoryStore store;
  testing::runOfiRanks(store, 2, [&](int rank, Ofi& t) {
    ASSERT_TRUE(t.directedReceives()) << "tcp;ofi_rxm offers FI_DIRECTED_RECV";
    if (rank == 1) {
      RawEndpoint stranger(store, 0);
      // Rank 1's first large payload goes out as id 1. Shorter than the provider's eager size,
      // so a receive it matched would complete at once, short and with the stranger's bytes.
      stranger.send(net::ofi::dataTag(1, 1), std::vector<uint8_t>(4096, 0xee));
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // waiting at rank 0 first
      std::vector<uint8_t> mine(large, 0x11);
      t.wait({t.isend(0, ofiP2p(1), mine.data(), mine.size())}, ofiSoon(5000), "send");
    } else {
      std::vector<uint8_t> got(large, 0);
      t.wait({t.irecv(1, ofiP2p(1), got.data(), got.size())}, ofiSoon(5000), "receive");
      EXPECT_EQ(std::count(got.begin(), got.end(), 0x11), static_cast<long>(large));
    }
  });
}

// A header as a member would send it (inline payload `payload`).
std::vector<uint8_t> headerBytes(int source, uint64_t session, uint64_t stream, uint64_t seq,
                                 const std::string& payload = "") {
  net::ofi::Header header;
  header.source = source;
  header.session = session;
  header.tag = net::WireTag::encode({TagSpace::kPointToPoint, 0, seq, 0});
  header.stream = stream;
  header.bytes = payload.size();
  header.inlineBytes = static_cast<uint32_t>(payload.size());
  std::vector<uint8_t> bytes(sizeof(header) + payload.size());
  std::memcpy(bytes.data(), &header, sizeof(header));
  std::memcpy(bytes.data() + sizeof(header), payload.data(), payload.size());
  return bytes;
}

// Ranks 0 and 1 as OfiTransports, rank 2 a raw member (RawEndpoint::member aimed at rank 0)
// running `raw`; each transport rank runs `body`.
void withRawMember(net::MemoryStore& store, const std::function<void(RawEndpoint&)>& raw,
                   const std::function<void(int, Ofi&)>& body) {
  const net::NetOptions options = testing::ofiLoopbackOptions();
  testing::runThreads(3, [&](int rank) {
    if (rank == 2) {
      raw(*RawEndpoint::member(store, 2, 3, 0));
      return;
    }
    Ofi t(store, rank, 3, options, testing::kLoopbackProvider);
    body(rank, t);
  });
}

// A member sends headers far ahead of their turn: rank 0 holds a bounded number, then fails it
// with the reason.
TEST(OfiHostile, HeadersFloodedAheadOfTheirTurnFailThePeer) {
  net::MemoryStore store;
  std::promise<void> finished;
  std::shared_future<void> done = finished.get_future().share();
  withRawMember(
      store,
      [&](RawEndpoint& flooder) {
        for (uint64_t i = 0; i <= 4096; ++i) {
          // #0 never comes.
          flooder.send(net::ofi::kHeaderTag, headerBytes(2, flooder.session(), 1 + i, 5));
        }
        flooder.drain(4097);
        done.wait_for(std::chrono::seconds(20));
      },
      [&](int rank, Ofi& t) {
        if (rank == 1) return;
        int v = 0;
        const std::string error = errorOf(t, t.irecv(2, ofiP2p(5), &v, sizeof(v)), 10000);
        EXPECT_NE(error.find("rank 2 sent more than 4096 messages"), std::string::npos) << error;
        std::string why;
        EXPECT_TRUE(t.peerFailed(2, &why));
        finished.set_value();
      });
}

// A member sends rank 0 a header with an unknown tag space and one with an unknown control kind:
// both are refused by the net level's checks (net/transport/wire_tag.h, control.h) before they take
// a stream number or reach matching, so the member's next header, the same stream number, is its
// first, and nothing failed or aborted.
TEST(OfiHostile, UnknownTagSpacesAndControlKindsAreDropped) {
  net::MemoryStore store;
  std::promise<void> sentAll;
  std::shared_future<void> sent = sentAll.get_future().share();
  withRawMember(
      store,
      [&](RawEndpoint& member) {
        auto edited = [&](const std::function<void(net::ofi::Header&)>& edit) {
          std::vector<uint8_t> bytes = headerBytes(2, member.session(), 0, 5, "FAKE");
          net::ofi::Header header;
          std::memcpy(&header, bytes.data(), sizeof(header));
          edit(header);
          std::memcpy(bytes.data(), &header, sizeof(header));
          return bytes;
        };
        member.send(net::ofi::kHeaderTag,
                    edited([](net::ofi::Header& h) { h.tag.space = TagSpace{7}; }));
        member.send(net::ofi::kHeaderTag, edited([](net::ofi::Header& h) {
                      h.kind = net::ofi::Kind::kControl;
                      h.control = net::WireControl::make(net::ControlKind{9}, 0);
                    }));
        member.send(net::ofi::kHeaderTag, headerBytes(2, member.session(), 0, 5, "REAL"));
        member.drain(3);
        sentAll.set_value();
      },
      [&](int rank, Ofi& t) {
        sent.wait();
        if (rank == 1) return;
        char got[4] = {};
        const std::string error = errorOf(t, t.irecv(2, ofiP2p(5), got, sizeof(got)));
        EXPECT_EQ(error, "");
        EXPECT_EQ(std::string(got, 4), "REAL");
        std::string why;
        EXPECT_FALSE(t.peerFailed(2, &why)) << why;
      });
}

// A member sends rank 0 a header claiming to be rank 1, ahead of rank 1's own: rank 0 drops it
// (the endpoint it came from is not rank 1's) and takes rank 1's real message.
TEST(OfiHostile, HeaderClaimingAnotherMemberIsDropped) {
  net::MemoryStore store;
  std::promise<void> forged;
  std::shared_future<void> sent = forged.get_future().share();
  withRawMember(
      store,
      [&](RawEndpoint& forger) {
        forger.send(net::ofi::kHeaderTag, headerBytes(1, forger.session(), 0, 5, "FAKE"));
        forger.drain(1);
        forged.set_value();
      },
      [&](int rank, Ofi& t) {
        ASSERT_TRUE(t.sourcesKnown()) << "tcp;ofi_rxm offers FI_SOURCE";
        sent.wait();
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the forgery lands first
          t.wait({t.isend(0, ofiP2p(5), "REAL", 4)}, ofiSoon(), "send");
          return;
        }
        char got[4] = {};
        const std::string error = errorOf(t, t.irecv(1, ofiP2p(5), got, sizeof(got)));
        EXPECT_EQ(error, "");
        EXPECT_EQ(std::string(got, 4), "REAL");
        EXPECT_GE(t.forgedDropped(), 1u);
      });
}

// A stranger who read the group's session from the store sends headers as rank 1: all dropped
// (they come from no member's endpoint), and rank 1's own message arrives.
TEST(OfiHostile, StrangersHeadersAsAMemberAreDropped) {
  net::MemoryStore store;
  testing::runOfiRanks(store, 2, [&](int rank, Ofi& t) {
    if (rank == 1) {
      const net::Bytes token = store.get("ofi/session", std::chrono::seconds(20));
      uint64_t session = 0;
      ASSERT_EQ(token.size(), sizeof(session));
      std::memcpy(&session, token.data(), sizeof(session));
      RawEndpoint stranger(store, 0);
      for (uint64_t stream = 0; stream < 3; ++stream) {
        stranger.send(net::ofi::kHeaderTag, headerBytes(1, session, stream, 7 + stream, "FAKE"));
      }
      stranger.drain(3);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      t.wait({t.isend(0, ofiP2p(7), "REAL", 4)}, ofiSoon(), "send");
    } else {
      char got[4] = {};
      const std::string error = errorOf(t, t.irecv(1, ofiP2p(7), got, sizeof(got)));
      EXPECT_EQ(error, "");
      EXPECT_EQ(std::string(got, 4), "REAL");
      int other = 0;  // nothing arrives for the stranger's other tags
      auto late = t.irecv(1, ofiP2p(8), &other, sizeof(other));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      EXPECT_FALSE(late->done());
      EXPECT_EQ(t.forgedDropped(), 3u);
    }
  });
}

// XCCL_NET_KEY_FILE alike on every rank: the group forms, and messages and one-sided writes
// flow as without it.
TEST(OfiAuth, RanksWithTheSameKeyFormAGroup) {
  net::MemoryStore store;
  std::promise<net::RemoteRegion> published;
  std::shared_future<net::RemoteRegion> region = published.get_future().share();
  const std::vector<std::string> errors = testing::runKeyedOfiRanks(
      store, 3, [](int) { return testing::testKey(0x42); },
      [&](int rank, Ofi& t) {
        std::vector<int> got(3, -1);
        std::vector<net::RequestPtr> requests;
        for (int peer = 0; peer < 3; ++peer) {
          if (peer == rank) continue;
          requests.push_back(t.irecv(peer, ofiP2p(1), &got[peer], sizeof(int)));
          requests.push_back(t.isend(peer, ofiP2p(1), &rank, sizeof(int)));
        }
        t.wait(requests, ofiSoon(), "exchange");
        for (int peer = 0; peer < 3; ++peer) {
          if (peer != rank) {
            EXPECT_EQ(got[peer], peer);
          }
        }
        std::vector<uint8_t> memory(8, 0);
        if (rank == 0) {
          auto reg = t.registerMemory(memory.data(), memory.size());
          published.set_value(reg->remote());
          t.wait({t.iwaitWrite(1, 3)}, ofiSoon(), "signal");
          EXPECT_EQ(memory, std::vector<uint8_t>(8, 0x77));
        } else if (rank == 1) {
          std::vector<uint8_t> mine(8, 0x77);
          t.wait({t.iwrite(0, mine.data(), 8, region.get(), 0, 3)}, ofiSoon(), "write");
        }
        EXPECT_EQ(t.forgedDropped(), 0u);
        // Nobody leaves before the write landed.
        int token = 0;
        t.wait({t.isend((rank + 1) % 3, ofiP2p(2), &rank, sizeof(int)),
                t.irecv((rank + 2) % 3, ofiP2p(2), &token, sizeof(int))},
               ofiSoon(), "barrier");
      });
  for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(errors[rank], "") << "rank " << rank;
}

// A rank whose key file holds another key cannot prove it: creation fails on every rank, the
// others naming it, and nothing of it is delivered (no transport exists to deliver it).
TEST(OfiAuth, PeerWithAnotherKeyIsRefusedAtCreation) {
  net::MemoryStore store;
  bool ran = false;
  const std::vector<std::string> errors = testing::runKeyedOfiRanks(
      store, 3, [](int rank) { return testing::testKey(rank == 1 ? 0x66 : 0x42); },
      [&](int, Ofi&) { ran = true; });
  EXPECT_FALSE(ran);
  for (int rank : {0, 2}) {
    EXPECT_NE(errors[rank].find("rank 1 did not prove it holds this job's key "
                                "(XCCL_NET_KEY_FILE differs"),
              std::string::npos)
        << "rank " << rank << ": " << errors[rank];
  }
  EXPECT_NE(errors[1].find("did not prove it holds this job's key"), std::string::npos)
      << errors[1];
}

// A rank without the key file (its record says so) is refused by those with one, and refuses
// them, before any message is exchanged.
TEST(OfiAuth, PeerWithoutAKeyFileIsRefusedAtCreation) {
  net::MemoryStore store;
  bool ran = false;
  const std::vector<std::string> errors = testing::runKeyedOfiRanks(
      store, 2,
      [](int rank) { return rank == 1 ? std::nullopt : std::optional(testing::testKey(0x42)); },
      [&](int, Ofi&) { ran = true; });
  EXPECT_FALSE(ran);
  EXPECT_NE(errors[0].find("rank 1 runs the ofi engine without XCCL_NET_KEY_FILE and rank 0 "
                           "with one"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[1].find("rank 0 runs the ofi engine with XCCL_NET_KEY_FILE and rank 1 "
                           "without"),
            std::string::npos)
      << errors[1];
}

// A provider that cannot name a message's source endpoint is refused when a key file is set (a
// keyed group must check every sender), and only then.
TEST(OfiAuth, ProvidersWithoutSourcesAreRefusedWithAKeyFile) {
  fi_info* info = fi_allocinfo();
  ASSERT_NE(info, nullptr);
  info->fabric_attr->prov_name = ::strdup("nosource;ofi_rxm");
  info->caps = FI_TAGGED | FI_RMA;
  const std::string why = net::ofi::sourceRefusal(info, /*keyed=*/true);
  EXPECT_NE(why.find("XCCL_NET_KEY_FILE is set, and libfabric provider nosource;ofi_rxm cannot "
                     "name the endpoint a message came from (FI_SOURCE)"),
            std::string::npos)
      << why;
  EXPECT_EQ(net::ofi::sourceRefusal(info, /*keyed=*/false), "");
  info->caps |= FI_SOURCE;
  EXPECT_EQ(net::ofi::sourceRefusal(info, /*keyed=*/true), "");
  fi_freeinfo(info);
}

// Through the environment, as a job runs it: XCCL_NET_KEY_FILE (read once per process: a fresh
// one) makes createTransport's ranks prove its key, and tcp;ofi_rxm (FI_SOURCE) stays usable.
TEST(OfiAuth, KeyFileFromTheEnvironmentIsProven) {
  if (!testing::isFreshProcess()) {
    const std::string path = "/tmp/xccl-ofi-key-test-" + std::to_string(::getpid());
    std::ofstream(path, std::ios::binary) << std::string(40, 'k');
    ::chmod(path.c_str(), 0600);
    testing::inFreshProcess(
        {{"XCCL_NET_KEY_FILE", path.c_str()}, {"XCCL_OFI_PROVIDER", testing::kLoopbackProvider}});
    ::unlink(path.c_str());
    return;
  }
  std::string why;
  EXPECT_TRUE(net::ofi::available(&why)) << why;
  net::MemoryStore store;
  testing::runThreads(2, [&](int rank) {
    std::unique_ptr<net::Transport> t =
        net::ofi::createTransport(store, rank, 2, testing::ofiLoopbackOptions());
    int mine = rank + 20, got = -1;
    t->wait({t->isend(1 - rank, ofiP2p(1), &mine, sizeof(mine)),
             t->irecv(1 - rank, ofiP2p(1), &got, sizeof(got))},
            ofiSoon(), "exchange");
    EXPECT_EQ(got, 21 - rank);
  });
  // The record each rank published says it runs with a key file.
  const net::Bytes record = store.get("ofi/addr/0", std::chrono::seconds(1));
  auto zero = std::find(record.begin(), record.end(), uint8_t{0});
  ASSERT_NE(zero, record.end());
  EXPECT_EQ(*(zero + 1), 'k');
}

// Write completions whose CQ data names no peer (a rank past the group, or the target itself)
// are dropped; a peer's real signal still completes its wait.
TEST(OfiHostile, WriteCompletionsNamingNoPeerAreDropped) {
  net::MemoryStore store;
  std::promise<net::RemoteRegion> published;
  std::shared_future<net::RemoteRegion> region = published.get_future().share();
  std::promise<void> finished;
  std::shared_future<void> done = finished.get_future().share();
  testing::runOfiRanks(store, 2, [&](int rank, Ofi& t) {
    std::vector<uint8_t> memory(64, 0);
    if (rank == 0) {
      auto reg = t.registerMemory(memory.data(), memory.size());
      published.set_value(reg->remote());
      auto forged = t.iwaitWrite(1, 9);
      auto real = t.iwaitWrite(1, 7);
      t.wait({real}, ofiSoon(10000), "real signal");
      EXPECT_FALSE(forged->done());
      finished.set_value();
    } else {
      const net::RemoteRegion target = region.get();
      const net::ofi::SignalCodec codec(8);
      RawEndpoint stranger(store, 0);
      stranger.write(target, codec.encode(65535, 9));
      stranger.write(target, codec.encode(2, 9));
      stranger.write(target, codec.encode(0, 9));  // rank 0 writing to itself
      stranger.drain(3);
      t.wait({t.iwrite(0, memory.data(), 8, target, 0, 7)}, ofiSoon(), "write");
      done.wait_for(std::chrono::seconds(20));
    }
  });
}

// Requested registration keys are drawn at random: a peer that learnt one key cannot guess the
// next registration's.
TEST(OfiHostile, RegistrationKeysAreNotSequential) {
  testing::runOfiRanks(1, [&](int, Ofi& t) {
    std::vector<uint8_t> memory(8 * 4096);
    std::vector<std::unique_ptr<net::Registration>> regs;
    std::vector<uint64_t> keys;
    for (int i = 0; i < 8; ++i) {
      regs.push_back(t.registerMemory(memory.data() + i * 4096, 4096));
      keys.push_back(regs.back()->remote().key);
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      EXPECT_NE(keys[i], 0u);
      for (size_t j = 0; j < i; ++j) {
        const uint64_t gap = keys[i] > keys[j] ? keys[i] - keys[j] : keys[j] - keys[i];
        EXPECT_GT(gap, uint64_t{1} << 20) << "keys " << keys[j] << " and " << keys[i];
      }
    }
  });
}

}  // namespace
}  // namespace xccl::net::ofi
