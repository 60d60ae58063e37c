#include "net/transport/shm_rings/link.h"

#include <algorithm>

#include "common/error.h"

namespace xccl::net::shm_rings {

const char* validateHeader(const FrameHeader& header) {
  switch (header.type) {
    case FrameType::kData:
    case FrameType::kWrite: return header.tag.validate();
    case FrameType::kControl: return header.control.validate(header.bytes);
    case FrameType::kWriteAck:
      return header.bytes <= kMaxControlBytes ? nullptr : "write acknowledgement too long";
  }
  return "unknown frame type";
}

void Link::enqueue(const FrameHeader& header, const void* payload, RequestPtr request,
                   std::vector<RequestPtr>* completed) {
  bool wrote = false;
  {
    std::lock_guard<std::mutex> guard(sendMutex_);
    if (closed_) {
      XCCL_THROW(ErrorKind::kPeerFailure, "rank ", peer_,
                 " can no longer be reached over shared memory");
    }
    sendQueue_.push_back({header, static_cast<const uint8_t*>(payload), 0, std::move(request)});
    // Only the frame at the front may write: the stream must stay in order.
    if (sendQueue_.size() == 1) wrote = flushLocked(completed);
  }
  if (wrote) ringDoorbell(peerBox_);
}

bool Link::flush(std::vector<RequestPtr>* completed) {
  bool wrote;
  {
    std::lock_guard<std::mutex> guard(sendMutex_);
    wrote = flushLocked(completed);
  }
  if (wrote) ringDoorbell(peerBox_);
  return wrote;
}

bool Link::flushLocked(std::vector<RequestPtr>* completed) {
  bool wrote = false;
  while (!sendQueue_.empty()) {
    PendingSend& send = sendQueue_.front();
    const size_t total = sizeof(FrameHeader) + send.header.bytes;
    while (send.written < total) {
      size_t n;
      if (send.written < sizeof(FrameHeader)) {
        const auto* h = reinterpret_cast<const uint8_t*>(&send.header);
        n = out_.write(h + send.written, sizeof(FrameHeader) - send.written);
      } else {
        n = out_.write(send.payload + (send.written - sizeof(FrameHeader)), total - send.written);
      }
      if (n == 0) return wrote;  // the ring is full: the peer's read wakes us
      send.written += n;
      wrote = true;
    }
    if (send.request) completed->push_back(std::move(send.request));
    sendQueue_.pop_front();
  }
  return wrote;
}

bool Link::readAvailable(FrameSink& sink) {
  bool moved = false;
  for (;;) {
    if (!inPayload_) {
      const size_t n = in_.read(reinterpret_cast<uint8_t*>(&readHeader_) + headerGot_,
                                sizeof(FrameHeader) - headerGot_);
      if (n == 0) break;
      moved = true;
      headerGot_ += n;
      if (headerGot_ < sizeof(FrameHeader)) break;
      headerGot_ = 0;
      if (readHeader_.magic != kFrameMagic) {
        XCCL_THROW(ErrorKind::kPeerFailure, "corrupt frame from rank ", peer_,
                   " in shared memory (magic ", readHeader_.magic, ")");
      }
      if (const char* why = validateHeader(readHeader_)) {
        XCCL_THROW(ErrorKind::kPeerFailure, "corrupt frame from rank ", peer_,
                   " in shared memory: ", why);
      }
      target_ = sink.onHeader(peer_, readHeader_);
      inPayload_ = true;
      payloadGot_ = 0;
    }
    const size_t left = readHeader_.bytes - payloadGot_;
    if (left > 0) {
      const size_t n = target_.data ? in_.read(target_.data + payloadGot_, left) : in_.skip(left);
      if (n == 0) break;
      moved = true;
      payloadGot_ += n;
      if (payloadGot_ < readHeader_.bytes) break;
    }
    inPayload_ = false;
    const FrameHeader header = readHeader_;
    const FrameTarget target = target_;
    target_ = FrameTarget{};
    sink.onPayload(peer_, header, target);
  }
  if (moved) ringDoorbell(peerBox_);  // space freed for the peer's producer
  return moved;
}

bool Link::readIdle() noexcept {
  try {
    return in_.readable() == 0;
  } catch (...) {
    return true;
  }
}

std::vector<RequestPtr> Link::closeSends() {
  std::lock_guard<std::mutex> guard(sendMutex_);
  closed_ = true;
  std::vector<RequestPtr> requests;
  for (auto& send : sendQueue_) {
    if (send.request) requests.push_back(std::move(send.request));
  }
  sendQueue_.clear();
  return requests;
}

}  // namespace xccl::net::shm_rings
