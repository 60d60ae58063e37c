// Headers from each source in stream order, whatever order the provider completes them in
// (wire.h says why there are streams). What a source sends ahead of its turn is held until the
// gap fills, at most kMaxEarlyHeaders messages and kMaxEarlyBytes bytes per source. A source past
// either cap, or repeating a stream number (a reliable endpoint never delivers one twice), is
// refused for good: what it has held is freed and whatever it sends later is dropped, so a peer
// flooding out-of-order headers cannot grow memory without bound.
//
// Pure (no libfabric): the transport calls it with its mutex held; the fuzzer drives it alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "net/transport/ofi/wire.h"

namespace xccl::net::ofi {

// Legitimately ahead are only the headers sent while an earlier one is held up: posted by
// another sending thread first, or overtaking a header the provider moves by rendezvous (inline
// payloads past its eager size). Thousands are far beyond that, and at most 64 MiB per peer.
constexpr size_t kMaxEarlyHeaders = 4096;
constexpr size_t kMaxEarlyBytes = size_t{64} << 20;

class HeaderStreams {
 public:
  explicit HeaderStreams(int size) : sources_(size) {}

  enum class Verdict {
    kInTurn,   // deliver it now, then the held ones nextLocked() hands out
    kHeld,     // ahead of its turn: copied and kept
    kRefused,  // this header broke the source's stream or a cap: *why says how (fail the peer)
    kDropped,  // the source was refused before: ignored
  };
  // `header` comes from parseHeader (its source is in range); `message` is the whole message
  // (`length` bytes, header included), copied when held.
  Verdict acceptLocked(const Header& header, const uint8_t* message, size_t length,
                       std::string* why);
  // After an in-turn delivery: the held message from `source` that is now in turn, moved into
  // *message (whole, header first), or false when the next one has not arrived.
  bool nextLocked(int source, std::vector<uint8_t>* message);

  // What `source` holds now (tests and the fuzzer check the caps with these).
  size_t heldCountLocked(int source) const { return sources_[source].early.size(); }
  size_t heldBytesLocked(int source) const { return sources_[source].bytes; }

 private:
  struct Source {
    uint64_t next = 0;  // the stream number in turn
    std::map<uint64_t, std::vector<uint8_t>> early;
    size_t bytes = 0;  // in `early`
    bool refused = false;
  };
  void refuseLocked(Source& source);

  std::vector<Source> sources_;
};

}  // namespace xccl::net::ofi
