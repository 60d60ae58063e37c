#include "net/transport/tcp/wire.h"

#include <algorithm>
#include <cstring>
#include <exception>

#include "common/sha256.h"

namespace xccl::net::tcp {

const char* validateHeader(const FrameHeader& header) {
  if (header.magic != kFrameMagic) return "bad frame magic";
  switch (header.type) {
    case FrameType::kData:
    case FrameType::kWrite:
    case FrameType::kWriteAck:
      if (const char* why = header.tag.validate()) return why;
      if (header.length == 0 && header.total != 0) return "empty chunk of a non-empty message";
      if (header.length > kMaxChunkBytes) return "chunk longer than the largest chunk";
      if (header.total > kMaxMessageBytes) return "message longer than the largest message";
      if (header.offset > header.total || header.length > header.total - header.offset) {
        return "chunk outside its message";
      }
      if (header.type == FrameType::kWrite && header.target > kMaxMessageBytes) {
        return "write beyond the largest region";  // so target + total cannot overflow
      }
      if (header.type == FrameType::kWriteAck && header.total > kMaxControlBytes) {
        return "write acknowledgement too long";
      }
      return nullptr;
    case FrameType::kAck:
    case FrameType::kBye: return header.length == 0 ? nullptr : "payload on a frame that has none";
    case FrameType::kControl: return header.control.validate(header.length);
  }
  return "unknown frame type";
}

FrameHeader controlFrame(ControlKind kind, uint64_t round, size_t textBytes) {
  FrameHeader header;
  header.type = FrameType::kControl;
  header.control = WireControl::make(kind, round);
  header.length = static_cast<uint32_t>(std::min<size_t>(textBytes, kMaxControlBytes));
  return header;
}

void groupId(const std::string& storePrefix, const std::string& token, uint8_t out[kGroupIdBytes]) {
  crypto::Sha256 hash;
  const char kLabel[] = "xccl tcp group";
  hash.update(kLabel, sizeof(kLabel));  // with its NUL: the prefix cannot run into the label
  const uint64_t length = storePrefix.size();
  hash.update(&length, sizeof(length));
  hash.update(storePrefix.data(), storePrefix.size());
  hash.update(token.data(), token.size());
  const crypto::Digest digest = hash.finish();
  std::memcpy(out, digest.data(), kGroupIdBytes);
}

HelloExchange::HelloExchange(const HandshakeTerms& terms, int peer, int link,
                             const uint8_t nonce[kNonceBytes])
    : terms_(terms), dialing_(true), state_(State::kAwaitChallenge), peer_(peer), link_(link) {
  std::memcpy(dialerNonce_, nonce, kNonceBytes);
  out_ = make(HelloStep::kOffer);
  std::memcpy(out_.nonce, dialerNonce_, kNonceBytes);
  pending_ = true;
}

HelloExchange::HelloExchange(const HandshakeTerms& terms, const uint8_t nonce[kNonceBytes])
    : terms_(terms), dialing_(false), state_(State::kAwaitOffer) {
  std::memcpy(acceptorNonce_, nonce, kNonceBytes);
}

bool HelloExchange::outgoing(Hello* hello) {
  if (!pending_) return false;
  *hello = out_;
  pending_ = false;
  return true;
}

Hello HelloExchange::make(HelloStep step) const {
  Hello hello;
  hello.link = static_cast<uint16_t>(link_);
  hello.rank = terms_.self;
  hello.step = step;
  std::memcpy(hello.group, terms_.group, kGroupIdBytes);
  return hello;
}

void HelloExchange::mac(bool byAcceptor, uint8_t out[32]) const {
  // Every field fixed-size, in one order on both ends: no two different handshakes hash alike.
  const int32_t dialer = dialing_ ? terms_.self : peer_;
  const int32_t acceptor = dialing_ ? peer_ : terms_.self;
  const int32_t link = link_;
  const char* label = byAcceptor ? "xccl tcp acceptor" : "xccl tcp dialer";
  const uint16_t version = kWireVersion;
  const crypto::Span parts[] = {{label, std::strlen(label) + 1}, {&version, sizeof(version)},
                                {terms_.group, kGroupIdBytes},   {&dialer, sizeof(dialer)},
                                {&acceptor, sizeof(acceptor)},   {&link, sizeof(link)},
                                {dialerNonce_, kNonceBytes},     {acceptorNonce_, kNonceBytes}};
  const crypto::Digest digest =
      crypto::hmacSha256(terms_.key, kNetKeyBytes, parts, sizeof(parts) / sizeof(parts[0]));
  std::memcpy(out, digest.data(), digest.size());
}

std::string HelloExchange::checkHeader(const Hello& hello, HelloStep step) const {
  if (hello.magic != kHelloMagic) return "not an xccl handshake";
  if (hello.version != kWireVersion) {
    return "wire version " + std::to_string(hello.version) + " (this build speaks " +
           std::to_string(kWireVersion) + ")";
  }
  if (hello.step != step) return "handshake step " + std::to_string(int{uint8_t(hello.step)});
  if (!crypto::digestsEqual(hello.group, terms_.group, kGroupIdBytes)) {
    return "from another group or job";
  }
  return {};
}

std::string HelloExchange::receive(const void* bytes, size_t length) {
  const State state = state_;
  state_ = State::kRefused;  // until this hello is accepted
  if (length != sizeof(Hello)) return "handshake of " + std::to_string(length) + " bytes";
  Hello hello;
  std::memcpy(&hello, bytes, sizeof(hello));
  uint8_t expected[32];
  switch (state) {
    case State::kAwaitOffer: {
      if (std::string why = checkHeader(hello, HelloStep::kOffer); !why.empty()) return why;
      const int size = static_cast<int>(terms_.links.size());
      // Higher ranks dial lower ones: an offer from a lower rank (or ourselves) is refused.
      if (hello.rank <= terms_.self || hello.rank >= size) {
        return "from rank " + std::to_string(hello.rank) + ", not one expected here";
      }
      if (hello.link >= terms_.links[hello.rank]) {
        return "for link " + std::to_string(hello.link) + " of rank " + std::to_string(hello.rank);
      }
      peer_ = hello.rank;
      link_ = hello.link;
      std::memcpy(dialerNonce_, hello.nonce, kNonceBytes);
      out_ = make(HelloStep::kChallenge);
      std::memcpy(out_.nonce, acceptorNonce_, kNonceBytes);
      mac(/*byAcceptor=*/true, out_.mac);
      pending_ = true;
      state_ = State::kAwaitProof;
      return {};
    }
    case State::kAwaitChallenge: {
      if (std::string why = checkHeader(hello, HelloStep::kChallenge); !why.empty()) return why;
      if (hello.rank != peer_) return "answered as rank " + std::to_string(hello.rank);
      if (hello.link != link_) return "answered for link " + std::to_string(hello.link);
      std::memcpy(acceptorNonce_, hello.nonce, kNonceBytes);
      mac(/*byAcceptor=*/true, expected);
      if (!crypto::digestsEqual(expected, hello.mac, sizeof(expected))) {
        return "it did not prove it holds this job's key (XCCL_NET_KEY_FILE differs, or it is "
               "not of this job)";
      }
      out_ = make(HelloStep::kProof);
      mac(/*byAcceptor=*/false, out_.mac);
      pending_ = true;
      state_ = State::kDone;
      return {};
    }
    case State::kAwaitProof: {
      if (std::string why = checkHeader(hello, HelloStep::kProof); !why.empty()) return why;
      if (hello.rank != peer_ || hello.link != link_) return "proof for another rank or link";
      mac(/*byAcceptor=*/false, expected);
      if (!crypto::digestsEqual(expected, hello.mac, sizeof(expected))) {
        return "wrong key: it did not prove it holds this job's key (a stranger, a replayed "
               "handshake, or XCCL_NET_KEY_FILE differs)";
      }
      state_ = State::kDone;
      return {};
    }
    case State::kDone:
    case State::kRefused: break;
  }
  return "a hello after the handshake ended";
}

FrameReader::Space FrameReader::next() {
  if (!inPayload_) {
    return {reinterpret_cast<uint8_t*>(&header_) + headerGot_, sizeof(header_) - headerGot_};
  }
  const size_t left = header_.length - payloadGot_;
  if (target_ == nullptr) return {discard_, std::min(left, sizeof(discard_))};
  return {target_ + payloadGot_, left};
}

std::string FrameReader::advance(size_t bytes, FrameSink& sink) {
  try {
    if (!inPayload_) {
      headerGot_ += bytes;
      if (headerGot_ < sizeof(header_)) return {};
      headerGot_ = 0;
      if (const char* why = validateHeader(header_)) return why;
      target_ = sink.onHeader(header_);
      payloadGot_ = 0;
      inPayload_ = true;
    } else {
      payloadGot_ += bytes;
    }
    if (payloadGot_ < header_.length) return {};
    inPayload_ = false;
    sink.onFrame(header_);
    return {};
  } catch (const std::exception& e) {
    return e.what();
  }
}

std::string FrameReader::feed(const uint8_t* data, size_t bytes, FrameSink& sink) {
  do {
    Space space = next();
    const size_t n = std::min(space.bytes, bytes);
    if (n > 0) std::memcpy(space.data, data, n);
    data += n;
    bytes -= n;
    std::string why = advance(n, sink);
    if (!why.empty()) return why;
  } while (bytes > 0);
  return {};
}

}  // namespace xccl::net::tcp
