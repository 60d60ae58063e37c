// The TCP transport's receive state (receive_state.h) driven without sockets: stash accounting
// across link failures, chunks that overlap, and the bound on messages that come before their
// receive (receive_queues.h, and through a transport).
#include <cstring>
#include <future>

#include "harness.h"
#include "net/transport/tcp/receive_state.h"

namespace xccl::net::tcp {
namespace {

// Every message lands in a buffer of its own; completions are counted.
struct FakeOwner : net::tcp::ReceiveOwner {
  std::vector<std::vector<uint8_t>> buffers;
  int completed = 0;
  std::vector<int> dropped;
  void open(Incoming& message) override {
    buffers.emplace_back(message.total);
    message.data = buffers.back().data();
  }
  uint8_t* landWrite(int, Incoming&, const FrameHeader&) override { return nullptr; }
  void landStashedWrite(Incoming&, const net::tcp::Stashed&) override {}
  void complete(Incoming&) override { ++completed; }
  void dropLink(int link) override { dropped.push_back(link); }
};

FrameHeader chunk(uint64_t message, uint64_t seq, uint64_t offset, uint32_t length,
                  uint64_t total) {
  FrameHeader h;
  h.type = FrameType::kData;
  h.message = message;
  h.seq = seq;
  h.offset = offset;
  h.length = length;
  h.total = total;
  return h;
}

// One frame as a link delivers it: header, payload written where it was told, complete.
void deliver(ReceiveState& state, FakeOwner& owner, int link, const FrameHeader& h) {
  uint8_t* at = state.chunkHeader(link, h, owner);
  if (at != nullptr) std::memset(at, 0xab, h.length);
  state.chunkArrived(link, h, owner);
}

ReceiveState withLinks(int links) {
  ReceiveState state;
  state.slots.resize(links);
  return state;
}

// A chunk that overtook its message's predecessor is being read into the stash when its link
// fails (the transport clears the link's slot); the peer replays it on another link. Over many
// failures nothing stays counted: stashing still works after more failures than the stash's
// bound has chunks of this size.
TEST(TcpReceiveState, StashGivesItsBytesBackWhenItsLinkFails) {
  ReceiveState state = withLinks(2);
  FakeOwner owner;
  const uint32_t length = 512 << 10;
  const FrameHeader ahead = chunk(/*message=*/1, /*seq=*/1, 0, length, length);
  for (int failure = 0; failure < 3000; ++failure) {
    ASSERT_NE(state.chunkHeader(0, ahead, owner), nullptr) << "after " << failure << " failures";
    state.slots[0] = {};  // what linkDown does to a link's slot
  }
  EXPECT_EQ(state.stashedBytes(), 0u);
  deliver(state, owner, 1, ahead);  // the replay
  EXPECT_EQ(state.stashedBytes(), length);
  deliver(state, owner, 1, chunk(0, 0, 0, 8, 8));  // its predecessor: both complete
  EXPECT_EQ(owner.completed, 2);
  EXPECT_EQ(state.stashedBytes(), 0u);
  EXPECT_TRUE(state.stash.empty());
  EXPECT_EQ(state.received(), 2u);
}

// Chunks with fresh sequence numbers that all carry the same bytes of a message: the message
// has a hole and must never complete, however many of them come.
TEST(TcpReceiveState, RepeatedOffsetsNeverCompleteAMessage) {
  ReceiveState state = withLinks(1);
  FakeOwner owner;
  deliver(state, owner, 0, chunk(0, 0, 0, 8, 32));
  for (uint64_t seq = 1; seq < 8; ++seq) {
    state.slots[0] = {};  // a refused frame drops its link
    EXPECT_THROW(deliver(state, owner, 0, chunk(0, seq, 0, 8, 32)), std::runtime_error);
    EXPECT_THROW(deliver(state, owner, 0, chunk(0, seq, 4, 8, 32)), std::runtime_error);
  }
  EXPECT_EQ(owner.completed, 0);
  ASSERT_EQ(state.incoming.size(), 1u);
  EXPECT_EQ(state.incoming.front().arrived.bytes(), 8u);
  // The real rest completes it.
  state.slots[0] = {};
  for (uint64_t at = 8, seq = 1; at < 32; at += 8, ++seq)
    deliver(state, owner, 0, chunk(0, seq, at, 8, 32));
  EXPECT_EQ(owner.completed, 1);
}

// Overlap with a chunk still being read on another link, and between stashed chunks.
TEST(TcpReceiveState, OverlapInFlightOrStashedIsRefused) {
  ReceiveState state = withLinks(2);
  FakeOwner owner;
  ASSERT_NE(state.chunkHeader(0, chunk(0, 0, 0, 16, 32), owner), nullptr);  // being read
  EXPECT_THROW(state.chunkHeader(1, chunk(0, 1, 8, 16, 32), owner), std::runtime_error);
  state.chunkArrived(0, chunk(0, 0, 0, 16, 32), owner);
  EXPECT_EQ(owner.completed, 0);

  // Message 2 is not known yet: two chunks with the same bytes wait in the stash; when it
  // becomes known the second is refused and the message stays incomplete.
  state.slots[1] = {};
  deliver(state, owner, 1, chunk(2, 2, 0, 8, 16));
  deliver(state, owner, 1, chunk(2, 3, 0, 8, 16));
  EXPECT_EQ(state.stash.size(), 2u);
  deliver(state, owner, 0, chunk(0, 4, 16, 16, 32));  // message 0 completes
  EXPECT_EQ(owner.completed, 1);
  EXPECT_THROW(deliver(state, owner, 0, chunk(1, 5, 0, 4, 4)), std::runtime_error);
  EXPECT_EQ(owner.completed, 2);  // message 1 did complete; message 2's second copy was refused
  EXPECT_EQ(state.stashedBytes(), 0u);
  ASSERT_EQ(state.incoming.size(), 1u);
  EXPECT_FALSE(state.incoming.front().done);
}

// A first chunk announcing 1 TiB for a message nobody posted a receive for: refused with an
// error naming the sizes, before anything is allocated.
TEST(ReceiveQueues, UnexpectedTerabyteIsRefusedBeforeAllocating) {
  net::ReceiveQueues queues;
  const uint64_t limit = uint64_t{16} << 30;
  auto small = queues.addUnexpectedLocked(3, testing::p2pTag(1), 4096, limit, "THE_LIMIT");
  try {
    queues.addUnexpectedLocked(3, testing::p2pTag(2), uint64_t{1} << 40, limit, "THE_LIMIT");
    FAIL() << "a 1 TiB unexpected message was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPeerFailure);
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 3 sent a message of 1099511627776 bytes"), std::string::npos) << what;
    EXPECT_NE(what.find("THE_LIMIT"), std::string::npos) << what;
  }
  EXPECT_EQ(queues.unexpectedBytesLocked(3), 4096u);
  // The bytes come back once a receive takes the message.
  std::mutex mutex;
  std::condition_variable cv;
  queues.arrivedLocked(small);
  std::vector<uint8_t> into(4096);
  auto request = std::make_shared<net::Request>(3, testing::p2pTag(1), 4096, false, nullptr);
  net::PeerHealth health(4);
  queues.receive(request, into.data(), health, mutex, cv);
  EXPECT_TRUE(request->done());
  EXPECT_EQ(queues.unexpectedBytesLocked(3), 0u);
}

// Through a transport: a peer's message past XCCL_NET_MAX_UNEXPECTED_BYTES fails that peer,
// and the receive waiting on it says why.
TEST(TcpReceive, UnexpectedMessagePastTheLimitFailsThePeer) {
  auto options = testing::loopbackOptions("unexpected-limit");
  options.maxUnexpectedBytes = 1 << 20;
  std::promise<void> checked;
  std::shared_future<void> done = checked.get_future().share();
  const std::vector<uint8_t> big(2 << 20, 7);  // outlives the transports that send it
  testing::runRanks(2, options, [&](int rank, net::Transport& t) {
    if (rank == 1) {
      t.isend(0, testing::p2pTag(1), big.data(), big.size());  // nobody posted it
      int one = 1;
      t.isend(0, testing::p2pTag(2), &one, sizeof(one));
      ASSERT_EQ(done.wait_for(std::chrono::seconds(20)), std::future_status::ready);
      return;
    }
    int got = 0;
    auto later = t.irecv(1, testing::p2pTag(2), &got, sizeof(got));
    try {
      t.wait({later}, testing::soon(20000), "receive");
      ADD_FAILURE() << "the peer was not failed";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("rank 1 sent a message of 2097152 bytes"), std::string::npos) << what;
      EXPECT_NE(what.find("XCCL_NET_MAX_UNEXPECTED_BYTES"), std::string::npos) << what;
    }
    checked.set_value();
  });
}

}  // namespace
}  // namespace xccl::net::tcp
