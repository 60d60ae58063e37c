// A MessageTag as it travels: the one layout of the tag's fields that every engine's header
// embeds (tcp/wire.h FrameHeader, ofi/wire.h Header, shm_rings/link.h FrameHeader), its encoding
// from a MessageTag and back, and the one check of what a peer put there. Engines never spell
// the tag's fields themselves (tests/python/test_wire_vocabulary.py).
#pragma once

#include <cstdint>
#include <type_traits>

#include "net/transport/transport.h"

namespace xccl::net {

struct WireTag {
  uint64_t seq = 0;
  uint32_t step = 0;
  uint32_t op = 0;
  // Any 16-bit value may arrive (the enum's underlying type): validate() refuses unknown ones.
  TagSpace space = MessageTag{}.space;
  uint16_t reserved[3] = {};

  static WireTag encode(const MessageTag& tag);
  // Why a peer's tag is refused (an unknown TagSpace), or null. Hostile input: every engine's
  // header check calls it before anything is matched by the tag.
  const char* validate() const;
  // The tag, for one that validate() accepted.
  MessageTag decode() const { return {space, step, seq, op}; }
};
// Part of every engine's wire format: no padding, the same bytes on every build.
static_assert(sizeof(WireTag) == 24, "the tag's layout is part of every wire format");
static_assert(std::is_trivially_copyable_v<WireTag>, "headers are copied as bytes");

}  // namespace xccl::net
