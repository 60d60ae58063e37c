// libFuzzer target: the TCP transport's receive state (csrc/net/transport/tcp/receive_state.h) fed
// any sequence of chunk headers, payloads, link failures, posted receives and acknowledgements on
// three links, as the progress thread feeds it, with the transport's own matching
// (openReceiveLocked, a 64 KiB bound on unexpected bytes) and write admission (refuseWrite,
// writeLanding) into one registered region. It checks: payloads are written only inside what
// was handed out (the sanitizer), a message completes only with every byte of it written by its
// own chunks (a position pattern), the stash and the unexpected bytes stay within their bounds
// and equal to what is held, acknowledgements only move forward and never past what was sent.
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "net/rendezvous/bootstrap.h"
#include "net/transport/tcp/receive_state.h"

// Registration keys (RegionTable) come from here: a counter instead of bootstrap.cc's random
// draw keeps every run reproducible, and the store and sockets out of this target.
uint64_t xccl::net::randomToken() {
  static uint64_t next = 0x5eed;
  return ++next;
}

namespace {

using namespace xccl::net;
using namespace xccl::net::tcp;

constexpr int kLinks = 3;
constexpr int kPeer = 1;
constexpr uint64_t kUnexpectedLimit = 64 << 10;
constexpr uint64_t kSent = 1000;  // chunks this side sent: acknowledgements stop there
constexpr size_t kRegionBytes = 4096;

uint8_t pattern(uint64_t messageId, uint64_t at) {
  return static_cast<uint8_t>(1 + (messageId * 31 + at) % 251);  // never 0: unwritten is 0
}

void check(bool ok) {
  if (!ok) std::abort();
}

struct Input {
  const uint8_t* data;
  size_t size;
  uint8_t byte() {
    if (size == 0) return 0;
    --size;
    return *data++;
  }
  uint64_t u16() { return byte() | (uint64_t{byte()} << 8); }
};

struct Owner : ReceiveOwner {
  ReceiveQueues receives;
  PeerHealth health{2};
  std::mutex mutex;
  std::condition_variable cv;
  RegionTable regions;
  std::vector<uint8_t> region = std::vector<uint8_t>(kRegionBytes);  // exactly: the sanitizer
  uint64_t key = 0;
  std::optional<xccl::Error> failure;
  int completions = 0;

  void open(Incoming& message) override {
    if (message.type == FrameType::kWrite) {
      message.refusal = refuseWrite(regions, message, 0, kPeer);
    } else if (message.type == FrameType::kWriteAck) {
      message.answer.resize(message.total);
      message.data = message.answer.data();
    } else {
      openReceiveLocked(receives, kPeer, message, kUnexpectedLimit, "limit", &failure);
    }
  }
  uint8_t* landWrite(int, Incoming& message, const FrameHeader& header) override {
    return writeLanding(regions, message, header, 0);
  }
  void landStashedWrite(Incoming& message, const Stashed& chunk) override {
    uint8_t* at = writeLanding(regions, message, chunk.header, 0);
    if (at != nullptr && !chunk.bytes.empty())
      std::memcpy(at, chunk.bytes.data(), chunk.bytes.size());
  }
  void complete(Incoming& message) override {
    ++completions;
    check(message.done && message.arrived.bytes() == message.total);
    // Every byte is the one its own message's chunk carried: no hole, nothing misplaced. (Writes
    // share one region, where overlapping writes may race as they may in a program.)
    for (uint64_t i = 0;
         message.type != FrameType::kWrite && message.data != nullptr && i < message.total; ++i) {
      check(message.data[i] == pattern(message.id, i));
    }
    if (message.unexpected) receives.arrivedLocked(message.unexpected);
  }
  void dropLink(int) override {}
};

// A header near what the state expects, so that mutations reach its deeper states.
FrameHeader makeHeader(Input& in, const ReceiveState& state, uint64_t key) {
  FrameHeader h;
  const uint8_t kind = in.byte();
  h.type = kind % 8 == 0   ? FrameType::kWrite
           : kind % 8 == 1 ? FrameType::kWriteAck
                           : FrameType::kData;
  const int delta = static_cast<int>(in.byte() % 8) - 2;
  h.message =
      delta < 0 && state.nextKnown < static_cast<uint64_t>(-delta) ? 0 : state.nextKnown + delta;
  h.seq = state.received() + in.byte() % 16;
  if (kind & 0x80) h.seq = state.received() + in.u16() * 4;  // far ahead, or out of the window
  h.total = in.byte() % 4 == 0 ? in.u16() * 1024 : in.byte() % 64;
  if (kind & 0x40) h.total = uint64_t{1} << 40;  // announces a terabyte
  const uint64_t offset = in.byte();
  h.offset = h.total == 0 ? 0 : offset * 8 % h.total;
  h.length = static_cast<uint32_t>(
      std::min<uint64_t>(h.total - h.offset, in.byte() % 4 == 0 ? in.u16() : 8 + in.byte() % 32));
  h.tag = WireTag::encode({TagSpace::kPointToPoint, 0, in.byte() % 4u, 0});
  h.key = h.type == FrameType::kWrite ? (in.byte() % 4 == 0 ? key + 1 : key) : 0;
  h.target = h.type == FrameType::kWrite ? in.byte() * 16 : 0;
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  Owner owner;
  owner.key = owner.regions.addLocked(owner.region.data(), owner.region.size()).key;
  ReceiveState state;
  state.slots.resize(kLinks);
  struct Reading {
    bool active = false;
    FrameHeader header;
    uint8_t* at = nullptr;
  } reading[kLinks];
  std::vector<std::vector<uint8_t>> posted;  // receive buffers, exactly their size
  posted.reserve(64);
  uint64_t lastReceived = 0, lastAck = 0;
  while (in.size > 0 && !owner.failure) {
    const uint8_t op = in.byte();
    const int link = (op / 6) % kLinks;
    try {
      switch (op % 6) {
        case 0:
        case 1: {  // a chunk's header on `link`, after whatever it was reading was abandoned
          const FrameHeader h = makeHeader(in, state, owner.key);
          if (validateHeader(h) != nullptr) break;  // the frame reader refuses it
          if (reading[link].active) state.slots[link] = {};  // as a link taken down
          reading[link].active = false;
          reading[link].at = state.chunkHeader(link, h, owner);
          reading[link] = {true, h, reading[link].at};
          if (op % 6 == 1) break;  // stays in flight
          [[fallthrough]];
        }
        case 2: {  // the payload on `link` arrives
          if (!reading[link].active) break;
          Reading& r = reading[link];
          r.active = false;
          if (r.at != nullptr) {
            for (uint32_t i = 0; i < r.header.length; ++i) {
              r.at[i] = pattern(r.header.message, r.header.offset + i);
            }
          }
          state.chunkArrived(link, r.header, owner);
          break;
        }
        case 3:  // the link fails mid-chunk
          state.slots[link] = {};
          reading[link].active = false;
          break;
        case 4: {  // a receive is posted
          if (posted.size() == posted.capacity()) break;
          const uint64_t bytes = in.byte() % 4 == 0 ? in.u16() : in.byte() % 64;
          posted.emplace_back(bytes);
          auto request =
              std::make_shared<Request>(kPeer,
                                        MessageTag{TagSpace::kPointToPoint, 0, in.byte() % 4u, 0},
                                        bytes, false, nullptr);
          owner.receives.receive(request, posted.back().data(), owner.health, owner.mutex,
                                 owner.cv);
          break;
        }
        case 5: {  // an acknowledgement from the peer
          const uint64_t ack = lastAck + in.byte() % 32;
          if (state.acknowledged(ack, kSent)) check(ack > lastAck && ack <= kSent);
          break;
        }
      }
    } catch (const std::exception&) {
      // Refused: the transport drops the link it came on (its slot cleared).
      state.slots[link] = {};
      reading[link].active = false;
    }
    for (int other = 0; other < kLinks; ++other) {
      // A link the state dropped as stale reads nothing more (the transport resets its reader).
      if (reading[other].active && !state.slots[other].reading && !state.slots[other].duplicate) {
        reading[other].active = false;
      }
    }
    check(state.lastAck() >= lastAck && state.lastAck() <= kSent);
    lastAck = state.lastAck();
    check(state.received() >= lastReceived);
    lastReceived = state.received();
    size_t stashed = 0;
    for (const Stashed& chunk : state.stash) stashed += chunk.bytes.size();
    check(stashed == state.stashedBytes() && stashed <= kMaxStashedBytes);
    check(owner.receives.unexpectedBytesLocked(kPeer) <= kUnexpectedLimit);
    for (const Incoming& message : state.incoming) check(message.arrived.bytes() <= message.total);
  }
  if (owner.failure) state.clear();  // as failPeer does
  return 0;
}
