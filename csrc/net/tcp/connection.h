// One TCP connection to one peer: the framed, non-blocking send queue and the read state
// machine. Matching received frames to receives is the transport's job (FrameSink).
#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "net/tcp/socket.h"
#include "net/transport.h"

namespace xccl::net::tcp {

constexpr uint32_t kFrameMagic = 0x58434c32;  // "XCL2"

enum class FrameType : uint16_t {
  kData = 1,
  kAbort = 2,        // payload: the reason; the sender's communicator is dead
  kStatusQuery = 3,  // "where are you?", answered by the progress thread (no payload)
  kStatusReply = 4,  // payload: the status provider's text
};

// On the wire before every payload. Carries the tag, so mismatched collectives or foreign
// peers are detected rather than silently mis-reduced.
struct FrameHeader {
  uint32_t magic = kFrameMagic;
  FrameType type = FrameType::kData;
  TagSpace space = TagSpace::kCollective;
  uint32_t step = 0;
  uint32_t op = 0;  // MessageTag::op
  uint64_t seq = 0;
  uint64_t bytes = 0;
};
static_assert(sizeof(FrameHeader) == 32, "frame header layout is part of the wire format");

// Where a frame's payload goes; chosen by the transport when the header arrives.
struct FrameTarget {
  uint8_t* data = nullptr;  // nullptr with bytes > 0: discard the payload
};

class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // Called on the progress thread when a complete header arrived from `peer`.
  virtual FrameTarget onHeader(int peer, const FrameHeader& header) = 0;
  // Called on the progress thread when the payload of that frame is complete.
  virtual void onPayload(int peer, const FrameHeader& header, const FrameTarget& target) = 0;
};

class Connection {
 public:
  // The socket is non-blocking; the connection registers it with `epollFd` under `peer` and
  // switches write interest itself, under the send lock, so interest never lags the queue.
  Connection(int peer, Socket socket, int epollFd);

  int peer() const { return peer_; }
  int fd() const { return socket_.fd(); }

  // Queues a frame and writes as much as the socket takes right now from the calling thread
  // (the cheap path for small messages); the progress thread writes the rest. `request` is
  // appended to `completed` once its last byte is written. Throws kPeerFailure once closed.
  void enqueue(const FrameHeader& header, const void* payload, RequestPtr request,
               std::vector<RequestPtr>* completed);
  // Progress thread, socket writable.
  void flush(std::vector<RequestPtr>* completed);
  // Progress thread, socket readable. Returns false on end of stream (peer closed).
  bool readAvailable(FrameSink& sink);
  // Refuses further sends and returns the queued ones (for failing them). With `abortReason`,
  // first tells the peer why in an abort frame, when no frame is half-written (a half-written
  // frame cannot be interrupted; the peer then just sees the connection close).
  std::vector<RequestPtr> closeSends(const std::string* abortReason);
  void shutdownSocket();

 private:
  struct PendingSend {
    FrameHeader header;
    const uint8_t* payload;
    size_t written;  // over header + payload
    RequestPtr request;
  };
  void flushLocked(std::vector<RequestPtr>* completed);
  void watchWritableLocked(bool on);

  const int peer_;
  Socket socket_;
  const int epollFd_;
  bool watchingWritable_ = false;

  std::mutex sendMutex_;  // guards sendQueue_ and closed_; held while writing
  std::deque<PendingSend> sendQueue_;
  bool closed_ = false;

  // Read state, touched only by the progress thread.
  FrameHeader readHeader_;
  size_t headerGot_ = 0;
  size_t payloadGot_ = 0;
  bool inPayload_ = false;
  FrameTarget target_;
  std::vector<uint8_t> discard_;
};

}  // namespace xccl::net::tcp
