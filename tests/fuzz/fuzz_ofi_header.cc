// libFuzzer target: what a peer's endpoint can hand the libfabric transport, fabric-free. Header
// messages (raw bytes, or well-formed headers with hostile fields and stream numbers, one at a
// time or in bursts) go through parseHeader and the per-source stream order
// (net/transport/ofi/wire.h, streams.h) as the progress thread's onHeader takes them; 8-byte remote
// CQ data goes through the signal codec. Invariants: a header that passes names a peer in range, a
// tag or control message the net level accepts (net/transport/wire_tag.h, control.h), and carries
// only the payload its message holds (delivering it reads and copies exactly that: the sanitizer
// sees any byte past it); each source's headers come out in stream order without gaps or repeats;
// what a source holds ahead of its turn stays within kMaxEarlyHeaders and kMaxEarlyBytes, and a
// refused source stays refused; a decoded signal names a rank below the group's size.
//
// Input: byte 0 picks the group's size (1-16), byte 1 this rank; then records, each an op byte
// and its fields (see the switch). Seeds come from make_seeds.py.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "net/transport/ofi/streams.h"
#include "net/transport/ofi/wire.h"

namespace {

using xccl::net::TagSpace;
using xccl::net::ofi::Header;
using xccl::net::ofi::HeaderStreams;
using xccl::net::ofi::kEagerBytes;
using xccl::net::ofi::kHeaderSlotBytes;
using xccl::net::ofi::Kind;
using xccl::net::ofi::kMaxEarlyBytes;
using xccl::net::ofi::kMaxEarlyHeaders;
using Verdict = HeaderStreams::Verdict;

constexpr uint64_t kSession = 0x5345535349304e31;
constexpr int kMaxBurst = 4500;  // past kMaxEarlyHeaders

void check(bool ok) {
  if (!ok) std::abort();
}

struct Input {
  const uint8_t* data;
  size_t size;
  size_t at = 0;
  bool empty() const { return at >= size; }
  uint64_t take(size_t bytes) {  // little-endian, zeros past the end
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i, ++at) {
      if (at < size) v |= static_cast<uint64_t>(data[at]) << (8 * i);
    }
    return v;
  }
};

class Receiver {
 public:
  Receiver(int rank, int size) : rank_(rank), size_(size), streams_(size), next_(size, 0) {}

  // The progress thread's onHeader, with delivery reduced to what touches memory.
  void onHeader(const std::vector<uint8_t>& message) {
    check(message.size() <= kHeaderSlotBytes);
    Header header;
    if (xccl::net::ofi::parseHeader(message.data(), message.size(), kSession, rank_, size_,
                                    &header) != nullptr) {
      return;
    }
    check(header.source >= 0 && header.source < size_ && header.source != rank_);
    check(header.inlineBytes <= kEagerBytes &&
          header.inlineBytes == message.size() - sizeof(Header));
    // What passes carries a tag or a control message the net level accepts (the one check).
    check(header.kind == Kind::kData
              ? header.tag.validate() == nullptr
              : header.kind == Kind::kControl && header.control.validate(header.bytes) == nullptr);
    const int source = header.source;
    std::string why;
    const Verdict verdict = streams_.acceptLocked(header, message.data(), message.size(), &why);
    check(streams_.heldCountLocked(source) <= kMaxEarlyHeaders);
    check(streams_.heldBytesLocked(source) <= kMaxEarlyBytes);
    if (verdict == Verdict::kRefused) {
      check(!why.empty() && streams_.heldCountLocked(source) == 0);
      refused_.resize(size_, false);
      refused_[source] = true;
      return;
    }
    if (verdict == Verdict::kDropped)
      check(source < static_cast<int>(refused_.size()) && refused_[source]);
    if (verdict != Verdict::kInTurn) return;
    deliver(header, message.data() + sizeof(Header));
    std::vector<uint8_t> next;
    while (streams_.nextLocked(source, &next)) {
      check(next.size() >= sizeof(Header));
      std::memcpy(&header, next.data(), sizeof(header));
      check(header.source == source);
      deliver(header, next.data() + sizeof(Header));
    }
  }

 private:
  void deliver(const Header& header, const uint8_t* payload) {
    check(header.stream == next_[header.source]++);  // in order, no gap, no repeat
    // matchData copies an inline payload into a buffer of the message's size; control messages
    // become text. Either reads exactly inlineBytes from the message.
    if (header.inlineBytes == header.bytes) {
      std::vector<uint8_t> user(header.bytes);
      if (header.bytes > 0) std::memcpy(user.data(), payload, header.bytes);
      sink_ += user.empty() ? 0 : user.back();
    } else {
      check(header.kind == Kind::kData && header.inlineBytes == 0);
    }
  }

  const int rank_, size_;
  HeaderStreams streams_;
  std::vector<uint64_t> next_;  // what each source delivered so far
  std::vector<bool> refused_;
  uint8_t sink_ = 0;
};

std::vector<uint8_t> headerMessage(Header header, size_t inlineBytes, uint8_t fill) {
  std::vector<uint8_t> m(sizeof(Header) + inlineBytes, fill);
  std::memcpy(m.data(), &header, sizeof(header));
  return m;
}

// A header of this group with fields from the input: most pass parseHeader, some do not.
Header craft(Input& in, int size, size_t* inlineBytes) {
  Header h;
  h.session = kSession;
  const int source = static_cast<int>(in.take(1) % (size + 1));  // `size`: no such rank
  const bool negative = in.take(1) % 8 == 0;
  h.source = negative ? -1 - source : source;
  h.kind = static_cast<Kind>(1 + in.take(1) % 3);
  h.tag.space = static_cast<TagSpace>(in.take(1) % 5);
  h.tag.seq = in.take(2);
  h.control.kind = static_cast<xccl::net::ControlKind>(in.take(1) % 5);
  h.control.round = h.tag.seq;
  const uint64_t mode = in.take(1);
  // Full-size inline payloads sometimes (bursts of them are slow, and reach the byte cap).
  *inlineBytes = (mode & 0xc0) == 0xc0 ? kEagerBytes : in.take(2) % 300;
  h.inlineBytes = static_cast<uint32_t>(*inlineBytes);
  h.bytes = (mode & 1) ? h.inlineBytes : ((mode & 2) ? in.take(8) : h.inlineBytes + 1);
  if (mode & 4) h.inlineBytes += 1;  // disagrees with the message's length
  return h;
}

void signals(Input& in) {
  const size_t cqBytes = in.take(1) % 17;
  const int ranks = static_cast<int>(in.take(4) % (1 << 23));
  const int size = in.take(1) % 4 == 0 ? ranks : ranks + 1;  // 0 sometimes
  const uint64_t data = in.take(8);
  const xccl::net::ofi::SignalCodec codec(cqBytes);
  int rank = -1;
  uint64_t signal = 0;
  if (codec.decode(data, size, &rank, &signal)) {
    check(rank >= 0 && rank < size);
    check(codec.signalBits >= 64 || signal >> codec.signalBits == 0);
    if (codec.fits(rank, signal) && (cqBytes >= 8 || data >> (cqBytes * 8) == 0)) {
      check(codec.encode(rank, signal) == data);
    }
  } else {
    check(rank == -1);
  }
  // What a writer encodes decodes to the same rank and signal.
  const int writer = static_cast<int>(data % (1 << 16));
  const uint64_t sent =
      codec.signalBits >= 64 ? data : data & ((uint64_t{1} << codec.signalBits) - 1);
  if (codec.fits(writer, sent)) {
    check(codec.decode(codec.encode(writer, sent), writer + 1, &rank, &signal));
    check(rank == writer && signal == sent);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  Input in{data, size};
  const int group = 1 + static_cast<int>(in.take(1) % 16);
  const int rank = static_cast<int>(in.take(1) % group);
  Receiver receiver(rank, group);
  std::vector<uint64_t> cursor(group + 1, 0);  // the stream numbers crafted headers use
  while (!in.empty()) {
    switch (in.take(1) % 4) {
      case 0: {  // raw bytes as a whole message
        const size_t length = in.take(2) % (kHeaderSlotBytes + 1);
        std::vector<uint8_t> m(length, 0);
        for (size_t i = 0; i < length && !in.empty(); ++i) m[i] = static_cast<uint8_t>(in.take(1));
        receiver.onHeader(m);
        break;
      }
      case 1: {  // one crafted header, its stream near its source's cursor
        size_t inlineBytes = 0;
        Header h = craft(in, group, &inlineBytes);
        uint64_t& c = cursor[h.source >= 0 ? h.source : group];
        const int64_t delta = static_cast<int8_t>(in.take(1));
        h.stream = (in.take(1) % 16 == 0) ? in.take(8) : c + delta;
        if (h.stream == c) ++c;
        receiver.onHeader(headerMessage(h, inlineBytes, static_cast<uint8_t>(h.stream)));
        break;
      }
      case 2: {  // a burst ahead of (or behind) the cursor, to reach the caps
        size_t inlineBytes = 0;
        Header h = craft(in, group, &inlineBytes);
        // Full-size inline payloads reach the byte cap within ~1,024 headers.
        const int count = static_cast<int>(in.take(2) % (inlineBytes > 300 ? 1100 : kMaxBurst));
        uint64_t stream = cursor[h.source >= 0 ? h.source : group] + in.take(1) % 4;
        for (int i = 0; i < count; ++i) {
          h.stream = stream++;
          receiver.onHeader(headerMessage(h, inlineBytes, 0x42));
        }
        break;
      }
      case 3: signals(in); break;
    }
  }
  return 0;
}
