#include "net/transport/tcp/receive_state.h"

#include <cstring>
#include <iterator>
#include <stdexcept>

#include "common/error.h"

namespace xccl::net::tcp {
namespace {

MessageTag tagOf(const FrameHeader& header) { return header.tag.decode(); }

bool seenBit(const std::vector<uint64_t>& bits, uint64_t seq) {
  const uint64_t slot = seq % kWindow;
  return (bits[slot / 64] >> (slot % 64)) & 1;
}

// Both chunks lie inside their message (validateHeader), so no end wraps.
bool intersect(const FrameHeader& a, const FrameHeader& b) {
  return a.length > 0 && b.length > 0 && a.offset < b.offset + b.length &&
         b.offset < a.offset + a.length;
}

}  // namespace

bool ByteRanges::overlaps(uint64_t begin, uint64_t length) const {
  if (length == 0) return false;
  const uint64_t end = begin + length;
  auto after = ranges_.upper_bound(begin);
  if (after != ranges_.end() && after->first < end) return true;
  return after != ranges_.begin() && std::prev(after)->second > begin;
}

void ByteRanges::add(uint64_t begin, uint64_t length) {
  if (length == 0) return;
  bytes_ += length;
  uint64_t end = begin + length;
  // Chunks mostly arrive in order: merged, a message's map stays a few entries long.
  if (auto next = ranges_.find(end); next != ranges_.end()) {
    end = next->second;
    ranges_.erase(next);
  }
  auto at = ranges_.lower_bound(begin);
  if (at != ranges_.begin() && std::prev(at)->second == begin) {
    std::prev(at)->second = end;
  } else {
    ranges_[begin] = end;
  }
}

ReceiveState::ReceiveState() : seen(kWindow / 64, 0) {}

uint8_t* ReceiveState::chunkHeader(int link, const FrameHeader& header, ReceiveOwner& owner) {
  Slot& slot = slots.at(link);
  slot.duplicate = slot.stashing = slot.reading = false;
  if (header.seq < received_ || (header.seq - received_ < kWindow && seenBit(seen, header.seq))) {
    slot.duplicate = true;  // replayed after a link failure, but it had arrived: dropped
    return nullptr;
  }
  if (header.seq - received_ >= kWindow) throw std::runtime_error("sequence number out of window");
  // The peer replays a chunk only after taking the link it was on down; if that link is still
  // reading it here, it is stale: take it down before the replay writes the same bytes.
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& other = slots[i];
    if (static_cast<int>(i) == link || !other.reading || other.header.seq != header.seq) continue;
    owner.dropLink(static_cast<int>(i));
    other.reading = other.stashing = false;
    other.pending = {};
  }
  if (header.message > nextKnown) {
    if (header.message - nextKnown > kWindow) throw std::runtime_error("message id out of window");
    // Counted once stashed: a chunk abandoned while it is read (its link failed) costs nothing.
    if (header.length > kMaxStashedBytes - stashedBytes_) {
      throw std::runtime_error("too many chunks ahead");
    }
    slot.reading = slot.stashing = true;
    slot.header = slot.pending.header = header;
    slot.pending.bytes.resize(header.length);
    return slot.pending.bytes.data();
  }
  Incoming& message = knownMessage(header, owner);
  claim(message, header, link);
  slot.reading = true;
  slot.header = header;
  if (message.type == FrameType::kWrite) return owner.landWrite(link, message, header);
  return message.data == nullptr ? nullptr : message.data + header.offset;
}

void ReceiveState::chunkArrived(int link, const FrameHeader& header, ReceiveOwner& owner) {
  Slot& slot = slots.at(link);
  // Not reading: a duplicate, or the slot was cleared meanwhile (the peer failed).
  if (!slot.reading) return;
  slot.reading = false;
  // Bounded again now that it is whole: other links may have stashed meanwhile. Refused, it is
  // not counted as received, and comes again.
  if (slot.stashing && slot.pending.bytes.size() > kMaxStashedBytes - stashedBytes_) {
    throw std::runtime_error("too many chunks ahead");
  }
  // The chunk is ours: record it and move the cumulative acknowledgement past what is complete.
  const uint64_t bit = header.seq % kWindow;
  seen[bit / 64] |= uint64_t{1} << (bit % 64);
  while (seenBit(seen, received_)) {
    const uint64_t at = received_ % kWindow;
    seen[at / 64] &= ~(uint64_t{1} << (at % 64));
    ++received_;
  }
  if (slot.stashing) {
    stashedBytes_ += slot.pending.bytes.size();
    stash.push_back(std::move(slot.pending));
    slot.pending = {};
    slot.stashing = false;
    // Its predecessors may have become known while its payload was arriving (on other links).
    return drainStash(owner);
  }
  addChunk(knownMessage(header, owner), header, owner);
  drainStash(owner);
}

bool ReceiveState::acknowledged(uint64_t ack, uint64_t sent) {
  if (ack <= lastAck_) return false;
  if (ack > sent) throw std::runtime_error("acknowledges chunks never sent");
  lastAck_ = ack;
  return true;
}

void ReceiveState::clear() {
  incoming.clear();
  stash.clear();
  stashedBytes_ = 0;
  for (Slot& slot : slots) {
    const uint64_t landing = slot.landing;  // the owner's: it unpins it
    slot = {};
    slot.landing = landing;
  }
}

Incoming& ReceiveState::knownMessage(const FrameHeader& header, ReceiveOwner& owner) {
  if (header.message == nextKnown) {
    Incoming& in = incoming.emplace_back();
    in.tag = tagOf(header);
    in.total = header.total;
    in.type = header.type;
    in.id = header.message;
    in.key = header.key;
    in.target = header.target;
    ++nextKnown;
    owner.open(in);  // in place: a deque keeps its elements where they are
  }
  if (header.message < base) throw std::runtime_error("chunk of a finished message");
  Incoming& message = incoming[header.message - base];
  if (message.total != header.total || !(message.tag == tagOf(header)) || message.done ||
      message.type != header.type || message.key != header.key || message.target != header.target) {
    throw std::runtime_error("chunk disagrees with its message");
  }
  return message;
}

void ReceiveState::claim(const Incoming& message, const FrameHeader& header, int link) const {
  bool overlap = message.arrived.overlaps(header.offset, header.length);
  for (size_t i = 0; i < slots.size() && !overlap; ++i) {
    const Slot& other = slots[i];
    overlap = static_cast<int>(i) != link && other.reading && !other.stashing &&
              other.header.message == header.message && intersect(other.header, header);
  }
  // A sender cuts a message into disjoint chunks: an overlap is a corrupt or forged chunk, and
  // counting it would let a message with a hole complete.
  if (overlap) throw std::runtime_error("chunk overlaps bytes its message already has");
}

void ReceiveState::addChunk(Incoming& message, const FrameHeader& header, ReceiveOwner& owner) {
  message.arrived.add(header.offset, header.length);
  if (message.arrived.bytes() < message.total) return;
  message.done = true;
  // The sender of a large message waits for its acknowledgement; small ones completed once
  // written, and their acknowledgement can ride on later traffic or the heartbeat. A writer
  // waits for it whatever the size.
  if (message.total > kInlineBytes || message.type == FrameType::kWrite) ackDue = true;
  owner.complete(message);
  while (!incoming.empty() && incoming.front().done) {
    incoming.pop_front();
    ++base;
  }
}

void ReceiveState::drainStash(ReceiveOwner& owner) {
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t i = 0; i < stash.size(); ++i) {
      if (stash[i].header.message > nextKnown) continue;
      Stashed chunk = std::move(stash[i]);
      stash[i] = std::move(stash.back());
      stash.pop_back();
      stashedBytes_ -= chunk.bytes.size();
      Incoming& message = knownMessage(chunk.header, owner);
      claim(message, chunk.header, -1);
      if (message.type == FrameType::kWrite) {
        owner.landStashedWrite(message, chunk);
      } else if (message.data != nullptr && !chunk.bytes.empty()) {
        std::memcpy(message.data + chunk.header.offset, chunk.bytes.data(), chunk.bytes.size());
      }
      addChunk(message, chunk.header, owner);
      progress = true;
      break;
    }
  }
}

bool openReceiveLocked(ReceiveQueues& receives, int peer, Incoming& message, uint64_t limit,
                       const char* limitName, std::optional<Error>* failure) {
  PostedReceive matched;
  const auto match = receives.matchPostedLocked(peer, message.tag, message.total, &matched);
  if (match == ReceiveQueues::Match::kMatched) {
    message.request = std::move(matched.request);
    message.data = matched.data;
  }
  // A failed match leaves `data` null: the message is discarded.
  if (match != ReceiveQueues::Match::kNone) return true;
  try {
    message.unexpected =
        receives.addUnexpectedLocked(peer, message.tag, message.total, limit, limitName);
    message.data = message.unexpected->data.data();
  } catch (const Error& e) {
    *failure = e;  // `data` stays null: its bytes are discarded until the peer is failed
  }
  return false;
}

std::string refuseWrite(const RegionTable& regions, const Incoming& message, int self, int peer) {
  std::string why;
  if (regions.findLocked(message.key, message.target, message.total, &why) != nullptr) return {};
  return detail::concat("rank ", self, " refused a one-sided write of ", message.total,
                        " bytes at offset ", message.target, " from rank ", peer, ": ", why);
}

uint8_t* writeLanding(const RegionTable& regions, Incoming& message, const FrameHeader& header,
                      int self) {
  if (!message.refusal.empty()) return nullptr;
  std::string why;  // refuseWrite checked the range: only the key can have gone since
  uint8_t* at =
      regions.findLocked(message.key, message.target + header.offset, header.length, &why);
  if (at == nullptr) {
    message.refusal = detail::concat("rank ", self, " deregistered the memory while a one-sided ",
                                     "write of ", message.total, " bytes into it arrived");
  }
  return at;
}

}  // namespace xccl::net::tcp
