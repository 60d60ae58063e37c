// The net level's part of every engine's wire format (net/transport/wire_tag.h,
// net/transport/control.h) and the one handling of control messages (TransportBase::onControl): a
// tag survives its encoding, an unknown tag space or control kind is refused here for every engine,
// and an abort, a status query and a reply do what they do over every engine.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <tuple>
#include <vector>

#include "net/transport/control.h"
#include "net/transport/transport_base.h"
#include "net/transport/wire_tag.h"

namespace xccl::net {
namespace {

TEST(NetWire, TagsSurviveTheirEncoding) {
  for (TagSpace space :
       {TagSpace::kCollective, TagSpace::kPointToPoint, TagSpace::kMonitoredBarrier}) {
    const MessageTag tag{space, 0xfeedbeef, 0x0123456789abcdefull, 0x5eed};
    const WireTag wire = WireTag::encode(tag);
    EXPECT_EQ(wire.validate(), nullptr);
    EXPECT_EQ(wire.decode(), tag);
  }
  // A default tag is a default MessageTag's: headers that carry none still pass.
  EXPECT_EQ(WireTag{}.decode(), MessageTag{});
  // The layout every engine's header embeds: fixed offsets, no padding.
  EXPECT_EQ(offsetof(WireTag, seq), 0u);
  EXPECT_EQ(offsetof(WireTag, step), 8u);
  EXPECT_EQ(offsetof(WireTag, op), 12u);
  EXPECT_EQ(offsetof(WireTag, space), 16u);
  EXPECT_EQ(offsetof(WireControl, round), 0u);
  EXPECT_EQ(offsetof(WireControl, kind), 8u);
}

TEST(NetWire, UnknownTagSpacesAreRefused) {
  WireTag wire;
  for (uint16_t space : {0, 4, 7, 0xffff}) {
    wire.space = static_cast<TagSpace>(space);
    EXPECT_STREQ(wire.validate(), "unknown tag space") << space;
  }
}

TEST(NetWire, ControlMessagesAreCheckedOnce) {
  const WireControl abort = WireControl::make(ControlKind::kAbort, 0);
  EXPECT_EQ(abort.validate(0), nullptr);
  EXPECT_EQ(abort.validate(kMaxControlBytes), nullptr);
  EXPECT_STREQ(abort.validate(kMaxControlBytes + 1), "control text too long");
  const WireControl reply = WireControl::make(ControlKind::kStatusReply, 9);
  EXPECT_EQ(reply.round, 9u);
  EXPECT_EQ(reply.validate(12), nullptr);
  EXPECT_STREQ(reply.validate(uint64_t{1} << 62), "control text too long");
  const WireControl query = WireControl::make(ControlKind::kStatusQuery, 9);
  EXPECT_EQ(query.validate(0), nullptr);
  EXPECT_STREQ(query.validate(1), "text on a status query, which has none");
  for (uint8_t kind : {0, 4, 0xff}) {
    EXPECT_STREQ(WireControl::make(static_cast<ControlKind>(kind), 1).validate(0),
                 "unknown control kind")
        << int{kind};
  }
  EXPECT_STREQ(WireControl{}.validate(0), "unknown control kind");  // no kind set
}

// An engine with no data path: what TransportBase does with control messages, and what it asks
// the engine to send.
class ControlOnly final : public TransportBase {
 public:
  ControlOnly() : TransportBase(/*rank=*/0, /*size=*/3) {}
  const char* name() const override { return "test"; }
  RequestPtr isend(int, MessageTag, const void*, size_t, Completion) override { return nullptr; }
  RequestPtr irecv(int, MessageTag, void*, size_t, Completion) override { return nullptr; }
  void abort(const std::string&) override {}
  // Each peer answers a query at once, from inside the send (as a progress thread would later).
  std::vector<std::string> queryStatus(Deadline deadline) override {
    return status_.query(deadline, health_, [&](int peer, uint64_t round) {
      sendControl(peer, ControlKind::kStatusQuery, round, "");
      onControl(peer, ControlKind::kStatusReply, round, "rank " + std::to_string(peer) + " here");
    });
  }
  using TransportBase::onControl;

  std::vector<std::tuple<int, ControlKind, uint64_t, std::string>> sent;

 private:
  void sendControl(int peer, ControlKind kind, uint64_t round, const std::string& text) override {
    sent.emplace_back(peer, kind, round, text);
  }
  void failPeerLocked(const PeerLoss&, const Error&) override {}
  void failRequestsLocked(const Error&) override {}
};

TEST(NetWire, ControlMessagesAreHandledOnceForEveryEngine) {
  ControlOnly t;
  t.setStatusProvider([] { return std::string("at all_reduce #3"); });
  t.onControl(2, ControlKind::kStatusQuery, 41, "");
  ASSERT_EQ(t.sent.size(), 1u);
  EXPECT_EQ(t.sent[0], std::make_tuple(2, ControlKind::kStatusReply, uint64_t{41},
                                       std::string("at all_reduce #3")));

  const std::vector<std::string> replies = t.queryStatus(Clock::now() + std::chrono::seconds(5));
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[0], "at all_reduce #3");
  EXPECT_EQ(replies[1], "rank 1 here");
  EXPECT_EQ(replies[2], "rank 2 here");
  ASSERT_EQ(t.sent.size(), 3u);
  EXPECT_EQ(std::get<1>(t.sent[1]), ControlKind::kStatusQuery);

  t.onControl(1, ControlKind::kAbort, 0, "rank 1 gave up");
  std::string why;
  ASSERT_TRUE(t.peerFailed(1, &why));
  EXPECT_NE(why.find("rank 1 aborted the communicator: rank 1 gave up"), std::string::npos) << why;
  EXPECT_FALSE(t.peerFailed(2, &why));
  // The failed peer is not asked again; its answer is its error.
  const std::vector<std::string> after = t.queryStatus(Clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(after[1].rfind("!", 0), 0u) << after[1];
  EXPECT_NE(after[1].find("aborted the communicator"), std::string::npos) << after[1];
  EXPECT_EQ(after[2], "rank 2 here");
}

}  // namespace
}  // namespace xccl::net
