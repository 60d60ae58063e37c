#include "net/transport/ofi/streams.h"

#include "common/error.h"

namespace xccl::net::ofi {

HeaderStreams::Verdict HeaderStreams::acceptLocked(const Header& header, const uint8_t* message,
                                                   size_t length, std::string* why) {
  Source& source = sources_[header.source];
  if (source.refused) return Verdict::kDropped;
  if (header.stream == source.next) {
    ++source.next;
    return Verdict::kInTurn;
  }
  if (header.stream < source.next || source.early.count(header.stream) != 0) {
    *why = detail::concat("rank ", header.source, " sent stream message #", header.stream,
                          " twice (#", source.next, " is in turn): its messages are refused");
    refuseLocked(source);
    return Verdict::kRefused;
  }
  if (source.early.size() >= kMaxEarlyHeaders || length > kMaxEarlyBytes - source.bytes) {
    *why = detail::concat("rank ", header.source, " sent more than ", kMaxEarlyHeaders,
                          " messages or ", kMaxEarlyBytes, " bytes ahead of its message #",
                          source.next, " (holding ", source.early.size(), " of ", source.bytes,
                          " bytes; #", header.stream, " came): its messages are refused");
    refuseLocked(source);
    return Verdict::kRefused;
  }
  source.early.emplace(header.stream, std::vector<uint8_t>(message, message + length));
  source.bytes += length;
  return Verdict::kHeld;
}

bool HeaderStreams::nextLocked(int source, std::vector<uint8_t>* message) {
  Source& s = sources_[source];
  if (s.refused) return false;
  auto it = s.early.find(s.next);
  if (it == s.early.end()) return false;
  s.bytes -= it->second.size();
  *message = std::move(it->second);
  s.early.erase(it);
  ++s.next;
  return true;
}

void HeaderStreams::refuseLocked(Source& source) {
  source.refused = true;
  source.early.clear();
  source.bytes = 0;
}

}  // namespace xccl::net::ofi
