#include "net/transport/control.h"

namespace xccl::net {

WireControl WireControl::make(ControlKind kind, uint64_t round) {
  WireControl control;
  control.kind = kind;
  control.round = round;
  return control;
}

const char* WireControl::validate(uint64_t textBytes) const {
  switch (kind) {
    case ControlKind::kStatusQuery:
      return textBytes == 0 ? nullptr : "text on a status query, which has none";
    case ControlKind::kAbort:
    case ControlKind::kStatusReply:
      return textBytes <= kMaxControlBytes ? nullptr : "control text too long";
  }
  return "unknown control kind";
}

}  // namespace xccl::net
