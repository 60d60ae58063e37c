// One peer on this host as seen by ShmTransport: the framed send queue into the ring to it and
// the read state machine on the ring from it (the role of tcp/peer.h, over rings
// instead of a socket). Matching received frames to receives is the transport's job (FrameSink).
#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "net/transport/control.h"
#include "net/transport/shm_rings/ring.h"
#include "net/transport/transport.h"
#include "net/transport/wire_tag.h"

namespace xccl::net::shm_rings {

// "XCLQ" ("XCLP" before the shared tag and control layouts: net/transport/wire_tag.h, control.h).
constexpr uint32_t kFrameMagic = 0x58434c51;

enum class FrameType : uint16_t {
  kData = 1,     // `tag` names the message
  kControl = 2,  // `control` says which (net/transport/control.h); payload: its text
  // One-sided: `key`, `offset`, the write's tag (point-to-point, seq = the signal), `id` = the
  // writer's request id.
  kWrite = 3,
  kWriteAck = 4,  // id: the write's; `refused` 0 written, 1 refused (payload: why)
};

// Before every payload in a ring. Carries the full MessageTag as every engine does
// (net/transport/wire_tag.h: mismatched collectives are detected, never silently mis-reduced), the
// control fields every engine shares (net/transport/control.h) and, for one-sided writes, where the
// bytes go.
struct FrameHeader {
  uint32_t magic = kFrameMagic;
  FrameType type = FrameType::kData;
  uint16_t refused = 0;  // kWriteAck
  WireTag tag;  // kData, kWrite
  WireControl control;  // kControl
  uint64_t bytes = 0;  // the payload's
  uint64_t key = 0;
  uint64_t offset = 0;
  uint64_t id = 0;
};
static_assert(sizeof(FrameHeader) == 80, "frame header layout is shared between processes");

// Why a frame header a peer wrote is refused (then the peer is failed), or null: a known type,
// a tag or control message the net level accepts, a write's answer of at most kMaxControlBytes.
// The magic is checked before (Link::readAvailable names the value it found).
const char* validateHeader(const FrameHeader& header);

// Where a frame's payload goes; nullptr with bytes > 0: skipped (discarded).
struct FrameTarget {
  uint8_t* data = nullptr;
};

class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // Progress thread: a complete header arrived from `peer`; may throw (the peer is then failed).
  virtual FrameTarget onHeader(int peer, const FrameHeader& header) = 0;
  // Progress thread: that frame's payload is complete (written to the target or skipped).
  virtual void onPayload(int peer, const FrameHeader& header, const FrameTarget& target) = 0;
};

class Link {
 public:
  // `peerBox` is the peer's mailbox: its doorbell is rung after writing (data for it) and after
  // reading (space for it).
  Link(int peer, Ring out, Ring in, Mailbox& peerBox)
      : peer_(peer), out_(out.withPeer(peer)), in_(in.withPeer(peer)), peerBox_(peerBox) {}

  int peer() const { return peer_; }

  // Queues a frame and writes what fits at once from the calling thread; the progress thread
  // writes the rest. `request` is appended to `completed` once its last byte is in the ring.
  // Throws kPeerFailure once closed, or when the peer corrupted the ring (the progress thread's
  // next flush then fails the peer).
  void enqueue(const FrameHeader& header, const void* payload, RequestPtr request,
               std::vector<RequestPtr>* completed);
  // Progress thread: writes queued frames; true when it moved bytes.
  bool flush(std::vector<RequestPtr>* completed);
  // Progress thread: reads what the peer wrote; true when it moved bytes. Throws (the peer is
  // then failed) on a corrupt ring or frame, and whatever the sink throws.
  bool readAvailable(FrameSink& sink);
  // Whether the ring from the peer is empty (a dead peer's ring is drained before it counts as
  // lost: it may have sent its last messages and exited). A corrupt ring counts as empty.
  bool readIdle() noexcept;
  // Refuses further sends and returns the queued ones (for failing them).
  std::vector<RequestPtr> closeSends();

 private:
  struct PendingSend {
    FrameHeader header;
    const uint8_t* payload;
    size_t written;  // over header + payload
    RequestPtr request;
  };
  bool flushLocked(std::vector<RequestPtr>* completed);

  const int peer_;
  Ring out_, in_;
  Mailbox& peerBox_;

  std::mutex sendMutex_;  // guards sendQueue_ and closed_; held while writing (one producer)
  std::deque<PendingSend> sendQueue_;
  bool closed_ = false;

  // Read state, touched only by the progress thread.
  FrameHeader readHeader_;
  size_t headerGot_ = 0;
  size_t payloadGot_ = 0;
  bool inPayload_ = false;
  FrameTarget target_;
};

}  // namespace xccl::net::shm_rings
