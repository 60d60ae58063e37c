#include "net/transport/wire_tag.h"

namespace xccl::net {

WireTag WireTag::encode(const MessageTag& tag) {
  WireTag wire;
  wire.seq = tag.seq;
  wire.step = tag.step;
  wire.op = tag.op;
  wire.space = tag.space;
  return wire;
}

const char* WireTag::validate() const {
  switch (space) {
    case TagSpace::kCollective:
    case TagSpace::kPointToPoint:
    case TagSpace::kMonitoredBarrier: return nullptr;
  }
  return "unknown tag space";
}

}  // namespace xccl::net
