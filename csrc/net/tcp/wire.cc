#include "net/tcp/wire.h"

#include <algorithm>
#include <cstring>
#include <exception>

namespace xccl::net::tcp {

const char* validateHeader(const FrameHeader& header) {
  if (header.magic != kFrameMagic) return "bad frame magic";
  switch (header.type) {
    case FrameType::kData:
    case FrameType::kWrite:
    case FrameType::kWriteAck:
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
    case FrameType::kBye:
    case FrameType::kStatusQuery:
      return header.length == 0 ? nullptr : "payload on a frame that has none";
    case FrameType::kAbort:
    case FrameType::kStatusReply:
      return header.length <= kMaxControlBytes ? nullptr : "control payload too long";
  }
  return "unknown frame type";
}

uint64_t hashGroup(const std::string& prefix) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a: stable across builds and hosts
  for (unsigned char c : prefix) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

std::string checkHello(const void* bytes, size_t length, const HelloExpectation& expected,
                       Hello* out) {
  if (length != sizeof(Hello)) return "handshake of " + std::to_string(length) + " bytes";
  Hello hello;
  std::memcpy(&hello, bytes, sizeof(hello));
  if (hello.magic != kHelloMagic) return "not an xccl handshake";
  if (hello.version != kWireVersion) {
    return "wire version " + std::to_string(hello.version) + " (this build speaks " +
           std::to_string(kWireVersion) + ")";
  }
  if (hello.group != expected.group || hello.nonce != expected.nonce) {
    return "from another group or job";
  }
  if (hello.rank < expected.minRank || hello.rank > expected.maxRank ||
      hello.rank == expected.self) {
    return "from rank " + std::to_string(hello.rank) + ", not one expected here";
  }
  if (hello.link >= expected.links) return "for link " + std::to_string(hello.link);
  if (out != nullptr) *out = hello;
  return {};
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
