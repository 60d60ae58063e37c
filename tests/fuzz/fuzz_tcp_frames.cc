// libFuzzer target: arbitrary bytes on a TCP link, cut into arbitrary reads, through the frame
// reader (csrc/net/transport/tcp/wire.h). Whatever arrives, the reader must refuse it with a reason
// or hand out only frames that pass validation, writing payloads only inside the space it was
// given. Seeds of every frame type, one-sided writes included, come from make_seeds.py.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "net/transport/tcp/wire.h"

namespace {

using xccl::net::tcp::FrameHeader;
using xccl::net::tcp::FrameReader;
using xccl::net::tcp::FrameSink;

struct Sink : FrameSink {
  // Like the transport: some payloads go to a buffer exactly the payload's size (so the
  // sanitizer catches a write past it), some are discarded.
  std::vector<uint8_t> buffer;
  uint8_t* onHeader(const FrameHeader& header) override {
    if (xccl::net::tcp::validateHeader(header) != nullptr) std::abort();
    if (header.seq % 2 == 1) return nullptr;
    buffer.assign(header.length, 0);
    return buffer.data();
  }
  void onFrame(const FrameHeader& header) override {
    using xccl::net::tcp::FrameType;
    if (header.type == FrameType::kControl) {
      // The control protocol's check passed: a known kind, its text within the bound.
      if (header.control.validate(header.length) != nullptr) std::abort();
      if (header.length > xccl::net::kMaxControlBytes) std::abort();
      return;
    }
    if (!xccl::net::tcp::isMessage(header.type)) return;
    if (header.offset > header.total || header.length > header.total - header.offset) {
      std::abort();
    }
    // The target adds `target` and `offset` to a registration's address: never wraps.
    if (header.type == FrameType::kWrite &&
        header.target + header.offset + header.length < header.target) {
      std::abort();
    }
    if (header.type == FrameType::kWriteAck && header.total > xccl::net::kMaxControlBytes) {
      std::abort();
    }
    // A message's tag is one the net level accepts: decoding it gives a known tag space.
    if (header.tag.validate() != nullptr) std::abort();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 97;  // how the bytes are cut into reads
  ++data;
  --size;
  Sink sink;
  FrameReader reader;
  for (size_t at = 0; at < size; at += step) {
    if (!reader.feed(data + at, std::min(step, size - at), sink).empty()) break;
  }
  return 0;
}
