// What goes over the endpoint, and why the libfabric tag is not the MessageTag.
//
// A MessageTag (space, step, 64-bit seq, op) does not fit libfabric's 64-bit tag, and matching
// must also catch a mismatched collective (same seq, other op), so matching is done here in
// software on per-peer ordered streams, like the TCP transport does, and libfabric's tags only
// route bytes:
//  - every message starts as a header (tag kHeaderTag) that carries the full MessageTag (as
//    every engine does: net/transport/wire_tag.h), a per-(source, destination) stream number
//    (headers are delivered in stream order whatever order the provider completes them in) and, up
//    to kEagerBytes, the payload itself;
//  - a larger payload travels as its own tagged message whose tag names the sender and a
//    per-sender id (dataTag). The receiver posts a receive for exactly that tag once the header
//    has matched a user receive, straight into the user's buffer; until then the provider keeps
//    it (ofi_rxm's rendezvous holds only the request, not the bytes), so nothing is copied.
// Control messages (net/transport/control.h: abort, status query and reply) are header messages
// too, their text inline.
#pragma once

#include <cstddef>
#include <cstdint>

#include "net/transport/control.h"
#include "net/transport/transport.h"
#include "net/transport/wire_tag.h"

namespace xccl::net::ofi {

// "XCO2": 2 since the shared tag and control layouts (net/transport/wire_tag.h, control.h).
constexpr uint32_t kMagic = 0x58434f32;
constexpr uint64_t kHeaderTag = 1;
// Payloads up to this ride in the header message: copied once on each side, but one message
// instead of a header and a rendezvous (64 KiB loopback send/recv: 0.36 GB/s instead of 0.19).
constexpr size_t kEagerBytes = 65536;

enum class Kind : uint16_t {
  kData = 1,     // `tag` names the message
  kControl = 2,  // `control` says which (net/transport/control.h); inline payload: its text
};

struct Header {
  uint32_t magic = kMagic;
  Kind kind = Kind::kData;
  uint16_t reserved = 0;
  int32_t source = 0;
  uint32_t inlineBytes = 0;  // payload bytes following this header in the same message
  WireTag tag;               // kData
  WireControl control;       // kControl
  uint64_t bytes = 0;    // the message's payload size
  uint64_t stream = 0;   // per (source, destination), from 0, no gaps
  uint64_t dataId = 0;   // with bytes > inlineBytes: the payload's dataTag id
  uint64_t session = 0;  // random per group (from the store): foreign messages are dropped
};
static_assert(sizeof(Header) == 88, "the header is part of the wire format");

constexpr size_t kHeaderSlotBytes = sizeof(Header) + kEagerBytes;

// High bit set: a payload message; 23 bits of sender rank; 40 bits of per-sender id (wraps
// after 2^40 large messages, long after any earlier one with the same id has completed).
inline uint64_t dataTag(int source, uint64_t id) {
  return (uint64_t{1} << 63) | (static_cast<uint64_t>(source) << 40) |
         (id & ((uint64_t{1} << 40) - 1));
}

// Why a received header message is dropped (not of this group, or malformed), or null with
// *header filled in. `message` holds `length` bytes (the slot's, at most kHeaderSlotBytes).
// A header that passes names a source in [0, size) other than `rank`, a known kind, a tag that
// WireTag::validate accepts (kData) or a control message that WireControl::validate accepts
// (kControl), and carries either its whole payload inline (at most kEagerBytes) or none of it
// (kData only).
const char* parseHeader(const uint8_t* message, size_t length, uint64_t session, int rank, int size,
                        Header* header);

// Remote CQ data holds the writer's rank in its top 16 bits and the signal below, since the
// target's completion names no source otherwise (no FI_SOURCE needed). With 8 bytes of CQ data
// (tcp, verbs, efa) a signal has 48 bits; a larger one is refused before anything is written.
struct SignalCodec {
  explicit SignalCodec(size_t cqDataBytes)
      : signalBits(cqDataBytes >= 8 ? 48 : (cqDataBytes * 8 > 16 ? cqDataBytes * 8 - 16 : 0)) {}
  bool fits(int rank, uint64_t signal) const {
    return signalBits > 0 && rank >= 0 && rank < (1 << 16) &&
           (signalBits >= 64 || signal >> signalBits == 0);
  }
  uint64_t encode(int rank, uint64_t signal) const {
    return (static_cast<uint64_t>(rank) << signalBits) | signal;
  }
  // The writer's rank and signal; false when the rank is not one of `size` ranks (a corrupt or
  // foreign completion: the caller drops it, and nothing is indexed with the rank).
  bool decode(uint64_t data, int size, int* rank, uint64_t* signal) const {
    const uint64_t writer = signalBits >= 64 ? 0 : data >> signalBits;
    if (size <= 0 || writer >= static_cast<uint64_t>(size)) return false;
    *rank = static_cast<int>(writer);
    *signal = signalBits >= 64 ? data : data & ((uint64_t{1} << signalBits) - 1);
    return true;
  }
  size_t signalBits;
};

}  // namespace xccl::net::ofi
