// Bit-level views of values for the tests (C++17 has no std::bit_cast).
#pragma once

#include <cstring>

namespace xccl::testing {

// `from`'s object representation read as a `To` of the same size: float <-> uint32_t bits.
template <typename To, typename From>
To bitCast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bitCast needs types of one size");
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

}  // namespace xccl::testing
