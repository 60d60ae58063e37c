// The TCP wire format's reader: valid frames come out whole, corrupt ones are refused with a
// reason (the connection is dropped), never trusted.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "net/transport/tcp/wire.h"

namespace xccl::net::tcp {
namespace {

struct Recorder : FrameSink {
  std::vector<FrameHeader> frames;
  std::vector<uint8_t> payload = std::vector<uint8_t>(1 << 16);
  uint8_t* onHeader(const FrameHeader& header) override {
    return header.length <= payload.size() ? payload.data() : nullptr;
  }
  void onFrame(const FrameHeader& header) override { frames.push_back(header); }
};

std::vector<uint8_t> frame(const FrameHeader& header, const std::string& payload) {
  std::vector<uint8_t> out(sizeof(header) + payload.size());
  std::memcpy(out.data(), &header, sizeof(header));
  std::memcpy(out.data() + sizeof(header), payload.data(), payload.size());
  return out;
}

TEST(TcpWire, FramesSplitAnywhereComeOutWhole) {
  FrameHeader chunk;
  chunk.length = 5;
  chunk.total = 10;
  chunk.offset = 5;
  chunk.seq = 7;
  FrameHeader ack;
  ack.type = FrameType::kAck;
  ack.ack = 8;
  auto bytes = frame(chunk, "hello");
  auto more = frame(ack, "");
  bytes.insert(bytes.end(), more.begin(), more.end());
  for (size_t step : {size_t{1}, size_t{3}, size_t{71}, bytes.size()}) {
    Recorder sink;
    FrameReader reader;
    for (size_t at = 0; at < bytes.size(); at += step) {
      ASSERT_EQ(reader.feed(bytes.data() + at, std::min(step, bytes.size() - at), sink), "");
    }
    ASSERT_EQ(sink.frames.size(), 2u);
    EXPECT_EQ(sink.frames[0].seq, 7u);
    EXPECT_EQ(std::string(sink.payload.begin(), sink.payload.begin() + 5), "hello");
    EXPECT_EQ(sink.frames[1].ack, 8u);
    EXPECT_FALSE(reader.midFrame());
  }
}

TEST(TcpWire, CorruptHeadersAreRefusedWithAReason) {
  auto refused = [](FrameHeader header) {
    Recorder sink;
    FrameReader reader;
    auto bytes = frame(header, "");
    return reader.feed(bytes.data(), bytes.size(), sink);
  };
  FrameHeader h;
  h.magic = 0x12345678;
  EXPECT_EQ(refused(h), "bad frame magic");
  h = {};
  h.type = static_cast<FrameType>(99);
  EXPECT_EQ(refused(h), "unknown frame type");
  h = {};
  h.total = 10;
  h.offset = 8;
  h.length = 5;
  EXPECT_EQ(refused(h), "chunk outside its message");
  h.offset = UINT64_MAX;
  EXPECT_EQ(refused(h), "chunk outside its message");
  h = {};
  h.length = kMaxChunkBytes + 1;
  h.total = h.length;
  EXPECT_EQ(refused(h), "chunk longer than the largest chunk");
  h = {};
  h.type = FrameType::kAck;
  h.length = 1;
  EXPECT_EQ(refused(h), "payload on a frame that has none");
  // One-sided writes: chunks like any message's, and a target and answer within bounds.
  h = {};
  h.type = FrameType::kWrite;
  h.total = 10;
  h.offset = 8;
  h.length = 5;
  EXPECT_EQ(refused(h), "chunk outside its message");
  h.offset = 5;
  h.target = kMaxMessageBytes + 1;
  EXPECT_EQ(refused(h), "write beyond the largest region");
  h = {};
  h.type = FrameType::kWriteAck;
  h.total = kMaxControlBytes + 1;
  h.length = 1;
  EXPECT_EQ(refused(h), "write acknowledgement too long");
}

TEST(TcpWire, WriteFramesComeOutWithTheirTarget) {
  FrameHeader write;
  write.type = FrameType::kWrite;
  write.length = 4;
  write.total = 4;
  write.key = 0xfeed;
  write.target = 1 << 20;
  write.tag = WireTag::encode({TagSpace::kPointToPoint, 0, 9, 0});
  Recorder sink;
  FrameReader reader;
  auto bytes = frame(write, "abcd");
  ASSERT_EQ(reader.feed(bytes.data(), bytes.size(), sink), "");
  ASSERT_EQ(sink.frames.size(), 1u);
  EXPECT_EQ(sink.frames[0].key, 0xfeedu);
  EXPECT_EQ(sink.frames[0].target, 1u << 20);
  EXPECT_EQ(sink.frames[0].tag.decode().seq, 9u);
  EXPECT_EQ(std::string(sink.payload.begin(), sink.payload.begin() + 4), "abcd");
}

// The tag and the control fields are checked by the net level's one check of each
// (net/transport/wire_tag.h, net/transport/control.h); a frame failing it drops the link with that
// reason.
TEST(TcpWire, UnknownTagSpacesAndControlKindsAreRefused) {
  auto refused = [](FrameHeader header, const std::string& payload = "") {
    Recorder sink;
    FrameReader reader;
    auto bytes = frame(header, payload);
    return reader.feed(bytes.data(), bytes.size(), sink);
  };
  for (FrameType type : {FrameType::kData, FrameType::kWrite, FrameType::kWriteAck}) {
    FrameHeader h;
    h.type = type;
    h.tag.space = TagSpace{0};
    EXPECT_EQ(refused(h), "unknown tag space");
    h.tag.space = TagSpace{7};
    EXPECT_EQ(refused(h), "unknown tag space");
    h.tag.space = TagSpace::kMonitoredBarrier;
    EXPECT_EQ(refused(h), "");
  }
  FrameHeader control = controlFrame(ControlKind::kStatusReply, 3, 4);
  EXPECT_EQ(control.length, 4u);
  EXPECT_EQ(refused(control, "at 3"), "");
  control.control.kind = ControlKind{0};
  EXPECT_EQ(refused(control, "at 3"), "unknown control kind");
  control.control.kind = ControlKind{4};
  EXPECT_EQ(refused(control, "at 3"), "unknown control kind");
  control = controlFrame(ControlKind::kStatusQuery, 3, 0);
  control.length = 1;
  EXPECT_EQ(refused(control, "x"), "text on a status query, which has none");
  control = controlFrame(ControlKind::kAbort, 0, kMaxControlBytes + 5);
  EXPECT_EQ(control.length, kMaxControlBytes);  // cut by the sender
  control.length = kMaxControlBytes + 1;
  EXPECT_EQ(refused(control), "control text too long");
}

TEST(TcpWire, RandomBytesNeverCrashOrAllocate) {
  std::mt19937 gen(7);
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> bytes(std::uniform_int_distribution<size_t>(0, 300)(gen));
    for (auto& b : bytes) b = static_cast<uint8_t>(gen());
    if (round % 2 == 0 && bytes.size() >= 4) std::memcpy(bytes.data(), &kFrameMagic, 4);
    Recorder sink;
    FrameReader reader;
    (void)reader.feed(bytes.data(), bytes.size(), sink);
    for (const auto& header : sink.frames) EXPECT_EQ(validateHeader(header), nullptr);
  }
}

}  // namespace
}  // namespace xccl::net::tcp
