// ShmTransport against a peer that writes garbage into the shared rings: rank 1 is not a
// transport but the raw mapped file (Mailboxes), writing what it likes. Rank 0 must fail rank 1
// alone, with a reason its waiter rethrows, and keep talking to rank 2: no std::terminate from
// the progress thread, no copy outside a ring.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

#include "harness.h"
#include "net/transport/shm_rings/link.h"
#include "net/transport/shm_rings/mailboxes.h"
#include "net/transport/shm_rings/transport.h"
#include "shm_testing.h"
#include "threads.h"

namespace xccl {
namespace {

using namespace std::chrono_literals;
using net::shm_rings::FrameHeader;
using net::shm_rings::Mailboxes;
using testing::p2pTag;
using testing::soon;

std::unique_ptr<net::Transport> makeTransport(net::Store& store, int rank) {
  net::shm_rings::TransportOptions options;
  options.timeout = 10s;
  std::string why;
  auto t = net::shm_rings::ShmTransport::create(store, rank, 3, {0, 1, 2}, options, &why);
  if (!t) XCCL_THROW(ErrorKind::kInternal, "shared memory unavailable: ", why);
  return t;
}

// Ranks 0 and 2 are transports, rank 1 the attacker. `victim(t)` runs on rank 0 around the
// attack: before it (posting receives), `attack(boxes)` on rank 1, then, once the attack is
// done, `after(t)` on rank 0.
// Then ranks 0 and 2 must still exchange messages both ways.
void withAttacker(const std::function<void(net::Transport&)>& before,
                  const std::function<void(Mailboxes&)>& attack,
                  const std::function<void(net::Transport&)>& after) {
  net::MemoryStore store;
  testing::Latch posted(2), attacked(2), done(3);
  testing::runThreads(3, [&](int rank) {
    if (rank == 1) {
      std::string why;
      auto boxes = Mailboxes::create(store, "shm-p2p", 1, 3, 10s, &why);
      ASSERT_TRUE(boxes) << why;
      posted.arriveAndWait();
      attack(*boxes);
      boxes->wake(0);
      attacked.arriveAndWait();
      done.arriveAndWait();  // the file stays mapped until the others are through
      return;
    }
    auto t = makeTransport(store, rank);
    if (rank == 0) {
      before(*t);
      posted.arriveAndWait();
      attacked.arriveAndWait();  // after() must see the attack: a send before it would succeed
      after(*t);
    }
    int out = 100 + rank, in = -1;
    const int other = 2 - rank;
    t->wait({t->isend(other, p2pTag(9), &out, sizeof(out)),
             t->irecv(other, p2pTag(9), &in, sizeof(in))},
            soon(), "exchange after the attack");
    EXPECT_EQ(in, 100 + other);
    std::string why;
    EXPECT_FALSE(t->peerFailed(other, &why)) << why;
    done.arriveAndWait();
  });
}

void expectPeerFailure(const std::function<void()>& wait, const std::string& expected) {
  try {
    wait();
    ADD_FAILURE() << "no failure";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPeerFailure) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

// A data frame announcing 2^62 bytes nobody waits for: buffering it throws std::bad_alloc in
// the progress thread. It fails rank 1, not the process.
TEST(ShmHostilePeer, FrameAnnouncingAHugeSizeFailsOnlyThatPeer) {
  net::RequestPtr pending;
  int got = 0;
  withAttacker([&](net::Transport& t) { pending = t.irecv(1, p2pTag(2), &got, sizeof(got)); },
               [](Mailboxes& boxes) {
                 FrameHeader header;
                 header.tag = net::WireTag::encode({net::TagSpace::kPointToPoint, 0, 1, 0});
                 header.bytes = uint64_t{1} << 62;
                 ASSERT_EQ(boxes.ring(1, 0).write(&header, sizeof(header)), sizeof(header));
               },
               [&](net::Transport& t) {
                 expectPeerFailure([&] { t.wait({pending}, soon(), "recv from rank 1"); },
                                   "failed");
                 std::string why;
                 EXPECT_TRUE(t.peerFailed(1, &why));
               });
}

// A frame whose tag space or control kind is none the net level knows: the ring reader refuses
// it with the net level's reason (net/transport/wire_tag.h, net/transport/control.h) and rank 1
// fails.
TEST(ShmHostilePeer, UnknownTagSpaceOrControlKindFailsThatPeer) {
  for (const bool control : {false, true}) {
    net::RequestPtr pending;
    int got = 0;
    withAttacker([&](net::Transport& t) { pending = t.irecv(1, p2pTag(2), &got, sizeof(got)); },
                 [&](Mailboxes& boxes) {
                   FrameHeader header;
                   if (control) {
                     header.type = net::shm_rings::FrameType::kControl;
                     header.control = net::WireControl::make(net::ControlKind{9}, 1);
                   } else {
                     header.tag = net::WireTag::encode(p2pTag(2));
                     header.tag.space = net::TagSpace{7};
                   }
                   ASSERT_EQ(boxes.ring(1, 0).write(&header, sizeof(header)), sizeof(header));
                 },
                 [&](net::Transport& t) {
                   expectPeerFailure([&] { t.wait({pending}, soon(), "recv from rank 1"); },
                                     control ? "unknown control kind" : "unknown tag space");
                 });
  }
}

// A well-formed header for a 3-ring payload, then `head` moved past the bytes actually there:
// the reader must refuse, not copy 3 rings' worth out of a 1-ring buffer.
TEST(ShmHostilePeer, HeadMovedBeyondTheRingIsRefused) {
  std::vector<uint8_t> buffer;
  net::RequestPtr pending;
  size_t ringBytes = 0;
  withAttacker(
      [&](net::Transport& t) {
        // Any size the reader may be asked for: the receive is posted for what the frame says.
        buffer.assign(3 * net::shm_rings::kRingBytes, 0);
        pending = t.irecv(1, p2pTag(1), buffer.data(), buffer.size());
      },
      [&](Mailboxes& boxes) {
        ringBytes = boxes.ringBytes();
        FrameHeader header;
        header.tag = net::WireTag::encode({net::TagSpace::kPointToPoint, 0, 1, 0});
        header.bytes = 3 * net::shm_rings::kRingBytes;
        net::shm_rings::Ring ring = boxes.ring(1, 0);
        ASSERT_EQ(ring.write(&header, sizeof(header)), sizeof(header));
        ring.indices().head.fetch_add(header.bytes);
      },
      [&](net::Transport& t) {
        expectPeerFailure([&] { t.wait({pending}, soon(), "recv from rank 1"); },
                          "corrupted the shared-memory ring");
      });
  EXPECT_GT(ringBytes, 0u);
}

// The consumer's `tail` moved ahead of `head`: the producer must refuse to write instead of
// taking the ring as holding more than its capacity of free space.
TEST(ShmHostilePeer, TailMovedAheadOfHeadIsRefused) {
  withAttacker([](net::Transport&) {},
               [](Mailboxes& boxes) {
                 net::shm_rings::RingIndices& ring = boxes.ring(0, 1).indices();
                 ring.tail.store(ring.head.load() + 1);
               },
               [](net::Transport& t) {
                 std::vector<uint8_t> data(4096, 7);
                 expectPeerFailure(
                     [&] {
                       t.wait({t.isend(1, p2pTag(1), data.data(), data.size())}, soon(),
                              "send to rank 1");
                     },
                     "corrupted the shared-memory ring");
               });
}

}  // namespace
}  // namespace xccl
