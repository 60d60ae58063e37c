// The libfabric transport against failures and endpoints that do not follow its protocol: a send
// that fails before it is posted, a stranger's payload sent under a peer's tag, a member
// flooding headers ahead of their turn, forged write completions, guessable keys.
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <future>
#include <thread>

#include "net/ofi/fabric.h"
#include "net/ofi/wire.h"
#include "ofi_harness.h"

namespace xccl::net::ofi {
namespace {

using testing::errorOf;
using testing::ofiP2p;
using testing::ofiSoon;
using Ofi = OfiTransport;

// An endpoint outside the group on the same provider, aimed at one rank's endpoint (its name read
// from the store, where the ranks publish it): what anyone who can reach that endpoint, or a
// member not following the protocol, can send it.
class RawEndpoint {
 public:
  RawEndpoint(net::Store& store, int target) {
    net::ofi::Choice choice =
        net::ofi::chooseProvider(testing::kLoopbackProvider, testing::ofiLoopbackOptions());
    fabric_ = std::make_unique<net::ofi::Fabric>(choice.info);
    const net::Bytes record =
        store.get("ofi/addr/" + std::to_string(target), std::chrono::seconds(20));
    auto zero = std::find(record.begin(), record.end(), uint8_t{0});
    EXPECT_NE(zero, record.end());
    EXPECT_EQ(fi_av_insert(fabric_->av(), &*(zero + 1), 1, &addr_, 0, nullptr), 1);
  }
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

  std::unique_ptr<net::ofi::Fabric> fabric_;
  fi_addr_t addr_ = FI_ADDR_NOTAVAIL;
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

// A member (here a stranger holding the group's session, as rank 1) sends headers far ahead of
// their turn: rank 0 holds a bounded number, then fails rank 1 with the reason.
TEST(OfiHostile, HeadersFloodedAheadOfTheirTurnFailThePeer) {
  net::MemoryStore store;
  std::promise<void> finished;
  std::shared_future<void> done = finished.get_future().share();
  testing::runOfiRanks(store, 2, [&](int rank, Ofi& t) {
    if (rank == 1) {
      const net::Bytes token = store.get("ofi/session", std::chrono::seconds(20));
      net::ofi::Header header;
      header.source = 1;
      header.space = TagSpace::kPointToPoint;
      ASSERT_EQ(token.size(), sizeof(header.session));
      std::memcpy(&header.session, token.data(), sizeof(header.session));
      RawEndpoint flooder(store, 0);
      for (uint64_t i = 0; i <= 4096; ++i) {
        header.stream = 1 + i;  // #0 never comes
        std::vector<uint8_t> bytes(sizeof(header));
        std::memcpy(bytes.data(), &header, sizeof(header));
        flooder.send(net::ofi::kHeaderTag, std::move(bytes));
      }
      flooder.drain(4097);
      done.wait_for(std::chrono::seconds(20));
    } else {
      int v = 0;
      const std::string error = errorOf(t, t.irecv(1, ofiP2p(5), &v, sizeof(v)), 10000);
      EXPECT_NE(error.find("rank 1 sent more than 4096 messages"), std::string::npos) << error;
      std::string why;
      EXPECT_TRUE(t.peerFailed(1, &why));
      finished.set_value();
    }
  });
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
