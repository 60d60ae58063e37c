// The control protocol every engine that moves bytes itself carries (tcp, ofi, shm_rings): the
// kinds of control message, their fields as they travel (WireControl, embedded in every engine's
// header next to its WireTag), the one check of what a peer sent, and the bound on their text.
// TransportBase::onControl handles them, once for every engine; an engine only sends them
// (TransportBase::sendControl) and carries what is its own (tcp's acknowledgements and goodbye,
// the one-sided write frames). Engines never declare these kinds themselves
// (tests/python/test_wire_vocabulary.py).
#pragma once

#include <cstdint>
#include <type_traits>

namespace xccl::net {

enum class ControlKind : uint8_t {
  kAbort = 1,        // text: the reason; the sender's communicator is dead
  kStatusQuery = 2,  // "where are you?", answered by the progress thread; no text
  kStatusReply = 3,  // text: the status provider's answer to the query of the same round
};

// Longest control text (abort reasons, status answers) a peer may send; a longer one is cut by
// its sender and refused by its receiver.
constexpr uint32_t kMaxControlBytes = 1u << 20;

struct WireControl {
  uint64_t round = 0;  // kStatusQuery, kStatusReply: the query's round (StatusBoard)
  // Any byte may arrive: validate() refuses unknown kinds (0, the default, included).
  ControlKind kind = ControlKind{};
  uint8_t reserved[7] = {};

  static WireControl make(ControlKind kind, uint64_t round);
  // Why a control message with this kind and `textBytes` bytes of text is refused, or null.
  // Hostile input: every engine's header check calls it before the text is read.
  const char* validate(uint64_t textBytes) const;
};
static_assert(sizeof(WireControl) == 16, "the control fields are part of every wire format");
static_assert(std::is_trivially_copyable_v<WireControl>, "headers are copied as bytes");

}  // namespace xccl::net
