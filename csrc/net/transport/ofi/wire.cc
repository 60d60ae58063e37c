#include "net/transport/ofi/wire.h"

#include <cstring>

namespace xccl::net::ofi {

const char* parseHeader(const uint8_t* message, size_t length, uint64_t session, int rank, int size,
                        Header* header) {
  if (length < sizeof(Header)) return "too short for a header";
  std::memcpy(header, message, sizeof(Header));
  if (header->magic != kMagic || header->session != session) {
    return "not of this group (magic or session differ)";
  }
  if (header->source < 0 || header->source >= size || header->source == rank) {
    return "its source is no peer of this rank";
  }
  if (header->inlineBytes != length - sizeof(Header) || header->inlineBytes > kEagerBytes) {
    return "its inline payload size does not match the message";
  }
  switch (header->kind) {
    case Kind::kData:
      if (const char* why = header->tag.validate()) return why;
      // Inline whole, or a payload of its own (no part of it inline).
      if (header->inlineBytes != header->bytes && header->inlineBytes != 0) {
        return "a payload partly inline";
      }
      return nullptr;
    case Kind::kControl:
      if (header->inlineBytes != header->bytes) return "a control message not inline";
      return header->control.validate(header->bytes);
  }
  return "unknown message kind";
}

}  // namespace xccl::net::ofi
