// The TCP transport's wire format and a socket-free reader for it, so that everything a peer (or
// a stranger) can put on a connection is parsed and validated in one place that a fuzzer can
// drive without sockets (tests/fuzz/fuzz_tcp_frames.cc, fuzz_tcp_handshake.cc).
//
// A message is cut into chunks; every chunk is one frame carrying where it belongs (message id,
// offset, message length, tag) and a per-peer sequence number, so chunks may travel on any link
// and a chunk replayed after a link failure is recognised as a duplicate. Every frame also
// carries the sender's cumulative acknowledgement (all sequence numbers below it arrived).
// One-sided writes (Transport::iwrite) are messages too, of their own frame type: their chunks
// travel, are acknowledged and replayed exactly like a send's, and land in registered memory
// instead of a posted receive; the target answers each with a kWriteAck message (docs/network.md).
// A message's tag travels as every engine's does (net/transport/wire_tag.h), and control frames
// carry the control protocol every engine shares (net/transport/control.h: abort, status query and
// reply).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "net/transport/control.h"
#include "net/transport/wire_tag.h"

namespace xccl::net::tcp {

constexpr uint32_t kFrameMagic = 0x58434c34;  // "XCL4"
constexpr uint32_t kHelloMagic = 0x58434c48;  // "XCLH"
// 5: authenticated handshake; 6: the shared tag and control layouts (net/transport/wire_tag.h,
// control.h).
constexpr uint16_t kWireVersion = 6;
// Longest chunk payload a peer may send; chunks are cut at kChunkBytes, this bounds a reader.
constexpr uint32_t kMaxChunkBytes = 4u << 20;
// Largest message a frame may announce: bounds what a receiver allocates for an unexpected one.
constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 40;

enum class FrameType : uint8_t {
  kData = 1,     // one chunk of a message
  kAck = 2,      // no payload; `ack` is the news (also the heartbeat of an idle link)
  kControl = 3,  // `control` says which (net/transport/control.h); payload: its text
  kBye = 4,      // the sender is closing every link on purpose (its group is destroyed)
  // One chunk of a one-sided write: `key` names the target's registration, the message lands at
  // `target` bytes into it, the tag is the write's (a point-to-point tag whose seq is the signal,
  // 0: none).
  kWrite = 5,
  // One chunk of the target's answer to a write: the tag is a point-to-point tag whose seq is the
  // write's message id, the payload is empty when the bytes are in place, else why the write was
  // refused (nothing was written).
  kWriteAck = 6,
};

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  FrameType type = FrameType::kData;
  uint8_t reserved[3] = {};
  uint32_t length = 0;  // payload bytes of this frame
  uint32_t reserved2 = 0;
  WireTag tag;  // messages (kData, kWrite, kWriteAck)
  WireControl control;  // kControl
  uint64_t message = 0;  // per-peer message id (messages)
  uint64_t offset = 0;  // where the payload goes in the message (messages)
  uint64_t total = 0;  // the whole message's bytes (messages)
  uint64_t seq = 0;  // per-peer chunk sequence number (messages)
  uint64_t ack = 0;  // cumulative: every chunk with seq < ack arrived
  uint64_t key = 0;  // kWrite: the registration's key
  uint64_t target = 0;  // kWrite: where the message starts in the registered region
};
static_assert(sizeof(FrameHeader) == 112, "the frame header layout is part of the wire format");

// Whether frames of `type` are chunks of a message (sequenced, acknowledged, replayed).
inline bool isMessage(FrameType type) {
  return type == FrameType::kData || type == FrameType::kWrite || type == FrameType::kWriteAck;
}

// Why a header is refused, or null when it is valid.
const char* validateHeader(const FrameHeader& header);

// A control frame of `kind` for `round` whose text is `textBytes` long, cut to kMaxControlBytes
// (its `length`: send that many bytes of the text).
FrameHeader controlFrame(ControlKind kind, uint64_t round, size_t textBytes);

// The handshake that opens every connection (docs/network.md, "Who may connect"): a
// challenge-response over HMAC-SHA256 with the job's key, in three fixed-size hellos.
//   dialer -> acceptor  kOffer:     rank, link, group, the dialer's fresh nonce
//   acceptor -> dialer  kChallenge: rank, link, group, the acceptor's fresh nonce, its MAC
//   dialer -> acceptor  kProof:     the dialer's MAC
// Each MAC covers both nonces, the group, both ranks, the link and who sends it, so a recorded
// hello is worthless on another connection (the other side's nonce differs), and an acceptor's
// MAC cannot be reflected back as a dialer's proof.
enum class HelloStep : uint8_t { kOffer = 1, kChallenge = 2, kProof = 3 };
constexpr size_t kNonceBytes = 16;
constexpr size_t kGroupIdBytes = 16;
constexpr size_t kNetKeyBytes = 32;

struct Hello {
  uint32_t magic = kHelloMagic;
  uint16_t version = kWireVersion;
  uint16_t link = 0;
  int32_t rank = 0;  // the sender's
  HelloStep step = HelloStep::kOffer;
  uint8_t reserved[3] = {};
  uint8_t group[kGroupIdBytes] = {};
  uint8_t nonce[kNonceBytes] = {};  // kOffer, kChallenge: the sender's fresh challenge
  uint8_t mac[32] = {};  // kChallenge, kProof
};
static_assert(sizeof(Hello) == 80, "the handshake layout is part of the wire format");

// What both ends of a link must share: the job's key (net_key.h) and the group's id (unique per
// group and per creation: groupId()), and who may connect here.
struct HandshakeTerms {
  uint8_t key[kNetKeyBytes] = {};
  uint8_t group[kGroupIdBytes] = {};
  int self = 0;
  std::vector<int> links;  // by rank: how many links run to it (0 for self)
};

// The group's id: a hash of the store prefix and a token rank 0 drew for this creation.
void groupId(const std::string& storePrefix, const std::string& token, uint8_t out[kGroupIdBytes]);

// One end of one handshake, socket-free (the fuzzer drives it; handshake.h adds the socket).
class HelloExchange {
 public:
  // The dialer of `link` to `peer`: outgoing() is its offer.
  HelloExchange(const HandshakeTerms& terms, int peer, int link, const uint8_t nonce[kNonceBytes]);
  // The acceptor: waits for an offer from a higher rank.
  HelloExchange(const HandshakeTerms& terms, const uint8_t nonce[kNonceBytes]);

  // A hello to send now, if any (taken: the next call returns false until another is due).
  bool outgoing(Hello* hello);
  // A hello arrived. Returns why it is refused (the connection must then be dropped), else "".
  std::string receive(const void* bytes, size_t length);
  bool done() const { return state_ == State::kDone; }
  int peer() const { return peer_; }
  int link() const { return link_; }

 private:
  enum class State { kAwaitOffer, kAwaitChallenge, kAwaitProof, kDone, kRefused };
  std::string checkHeader(const Hello& hello, HelloStep step) const;
  Hello make(HelloStep step) const;
  void mac(bool byAcceptor, uint8_t out[32]) const;

  const HandshakeTerms& terms_;
  const bool dialing_;
  State state_;
  int peer_ = -1, link_ = -1;
  uint8_t dialerNonce_[kNonceBytes] = {}, acceptorNonce_[kNonceBytes] = {};
  bool pending_ = false;
  Hello out_;
};

// Receives a frame's payload: the reader asks where each frame's payload goes once its header
// is validated, and reports it complete. Throwing from either refuses the connection.
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // Where the payload of `header` goes (header.length bytes); null discards it.
  virtual uint8_t* onHeader(const FrameHeader& header) = 0;
  virtual void onFrame(const FrameHeader& header) = 0;
};

// The read state machine of one connection. The caller asks for the next place to put bytes
// (the header, or straight into the payload's destination: no copy), reads into it from the
// socket and reports how many arrived. feed() does the same from a byte buffer (fuzzers, tests).
class FrameReader {
 public:
  struct Space {
    uint8_t* data;
    size_t bytes;
  };
  Space next();
  // `bytes` arrived in next()'s space. Returns an empty string, or why the stream is refused
  // (the connection must then be dropped; the reader is left unusable).
  std::string advance(size_t bytes, FrameSink& sink);
  std::string feed(const uint8_t* data, size_t bytes, FrameSink& sink);
  // Whether a frame is partly read (its payload may be partly written where the sink said).
  bool midFrame() const { return headerGot_ > 0 || inPayload_; }

 private:
  FrameHeader header_;
  size_t headerGot_ = 0;
  bool inPayload_ = false;
  size_t payloadGot_ = 0;
  uint8_t* target_ = nullptr;
  uint8_t discard_[4096];
};

}  // namespace xccl::net::tcp
