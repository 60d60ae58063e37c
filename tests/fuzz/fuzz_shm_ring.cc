// libFuzzer target: the shared-memory ring reader and writer (csrc/net/transport/shm_rings/ring.h,
// link.h) in plain memory, no processes. The input is a script of what a hostile peer can do to the
// memory it shares with us: set either index of either ring to any value, write any bytes as
// frames, interleaved with our reads and sends. Whatever it does, no copy may leave a ring's buffer
// (each is a heap block exactly `capacity` long, so ASan sees a byte past it), and nothing is
// allocated beyond what a frame's sink accepts (kSinkCap; libFuzzer's -malloc_limit_mb catches
// any bigger allocation). A peer's violation must surface as an Error, after which the link is
// dropped, as ShmTransport does.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "net/transport/shm_rings/link.h"

namespace {

using xccl::net::shm_rings::FrameHeader;
using xccl::net::shm_rings::FrameSink;
using xccl::net::shm_rings::FrameTarget;
using xccl::net::shm_rings::FrameType;

// As ShmTransport: data may land in a buffer of exactly the frame's size (so ASan sees a write
// past it), larger frames are discarded (skipped); control texts are capped by the link.
constexpr uint64_t kSinkCap = uint64_t{1} << 16;

struct Sink : FrameSink {
  std::vector<uint8_t> buffer;
  uint64_t expected = 0;
  FrameTarget onHeader(int, const FrameHeader& header) override {
    if (header.magic != xccl::net::shm_rings::kFrameMagic) std::abort();  // the link checks first
    // ... and the rest of the header: a known type, a tag or control message the net level
    // accepts, texts within kMaxControlBytes.
    if (xccl::net::shm_rings::validateHeader(header) != nullptr) std::abort();
    if ((header.type == FrameType::kControl || header.type == FrameType::kWriteAck) &&
        header.bytes > xccl::net::kMaxControlBytes) {
      std::abort();
    }
    expected = header.bytes;
    if (header.bytes > kSinkCap || header.tag.seq % 3 == 2) return {};  // discarded
    buffer.assign(header.bytes, 0);
    return {buffer.data()};
  }
  void onPayload(int, const FrameHeader& header, const FrameTarget& target) override {
    if (header.bytes != expected) std::abort();
    if (target.data != nullptr && buffer.size() != header.bytes) std::abort();
  }
};

// Reads the script: bytes taken from the front, zeros once it runs out.
struct Script {
  const uint8_t* data;
  size_t size;
  uint64_t take(size_t bytes) {
    uint64_t v = 0;
    const size_t n = bytes < size ? bytes : size;
    std::memcpy(&v, data, n);
    data += n;
    size -= n;
    return v;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Script script{data, size};
  // Capacities from 16 bytes (smaller than a frame header) to 4 KiB, any alignment.
  const size_t capacity = 16 + script.take(2) % 4081;
  xccl::net::shm_rings::RingIndices inIdx{}, outIdx{};
  const uint64_t start = script.take(8);  // rings start anywhere in the 64-bit count
  inIdx.head = inIdx.tail = outIdx.head = outIdx.tail = start;
  std::vector<uint8_t> inData(capacity), outData(capacity);
  xccl::net::shm_rings::Mailbox box{};
  xccl::net::shm_rings::Ring in(&inIdx, inData.data(), capacity),
      out(&outIdx, outData.data(), capacity);
  // The peer's view: it produces into `in` and consumes from `out`.
  xccl::net::shm_rings::Ring peerIn = in, peerOut = out;
  xccl::net::shm_rings::Link link(1, out, in, box);
  Sink sink;
  std::vector<xccl::net::RequestPtr> completed;
  std::vector<uint8_t> drain(capacity);
  static const uint8_t kPayload[1 << 12] = {};
  while (script.size > 0) {
    const uint8_t op = static_cast<uint8_t>(script.take(1));
    try {
      switch (op % 8) {
        case 0: inIdx.head = script.take(8); break;  // the peer corrupts what it owns...
        case 1: outIdx.tail = script.take(8); break;
        case 2: inIdx.tail = script.take(8); break;  // ...and what it does not
        case 3: outIdx.head = script.take(8); break;
        case 4: {  // the peer writes the next bytes of the script as stream bytes
          const size_t n = script.take(2) % 512;
          const size_t have = n < script.size ? n : script.size;
          if (peerIn.write(script.data, have) > have) std::abort();
          script.data += have;
          script.size -= have;
          break;
        }
        case 5: {  // a well-formed header, any type and size, so frames get past the magic
          FrameHeader header;
          header.type = static_cast<FrameType>(1 + script.take(1) % 5);
          header.bytes = script.take(1) % 2 ? script.take(8) : script.take(2);
          header.tag.seq = script.take(1);
          header.tag.space = static_cast<xccl::net::TagSpace>(script.take(1) % 5);
          header.control.kind = static_cast<xccl::net::ControlKind>(script.take(1) % 5);
          peerIn.write(&header, sizeof(header));
          break;
        }
        case 6: link.readAvailable(sink); break;
        case 7: {  // we send; the peer drains some of it
          FrameHeader header;
          header.bytes = script.take(2) % sizeof(kPayload);
          link.enqueue(header, kPayload, nullptr, &completed);
          link.flush(&completed);
          peerOut.read(drain.data(), script.take(2) % (capacity + 1));
          break;
        }
      }
    } catch (const xccl::Error&) {
      return 0;  // the transport fails this peer and never touches its link again
    }
  }
  return 0;
}
