// TcpTransport's receive path (progress thread): chunks from any link into receives. Messages
// from one peer are matched in the order the peer sent them (message ids), whatever link their
// chunks came on, so FIFO per (source, tag) holds; a chunk of a message whose predecessors have
// not shown up yet is stashed (copied) until they have.
#include <cstring>

#include "common/logging.h"
#include "net/tcp/transport.h"

namespace xccl::net::tcp {
namespace {

// More than this stashed per peer means the peer does not follow the protocol.
constexpr size_t kMaxStashedBytes = size_t{1} << 30;

MessageTag tagOf(const FrameHeader& header) {
  return {static_cast<TagSpace>(header.space), header.step, header.tagSeq, header.op};
}

bool seen(const std::vector<uint64_t>& bits, uint64_t seq) {
  const uint64_t slot = seq % kWindow;
  return (bits[slot / 64] >> (slot % 64)) & 1;
}

}  // namespace

uint8_t* TcpTransport::onHeader(int peer, Link& link, const FrameHeader& header) {
  Receiving& r = receiving_[peer];
  Peer& p = *peers_[peer];
  Receiving::Slot& slot = r.slots[link.index];
  slot.duplicate = slot.stashing = false;
  if (header.ack > r.lastAck) {
    std::vector<RequestPtr> completed;
    {
      std::lock_guard<std::mutex> guard(p.sendMutex);
      if (header.ack > p.nextSeq) throw std::runtime_error("acknowledges chunks never sent");
      p.acked = std::max(p.acked, header.ack);
      flushPeer(p, &completed);  // the window moved, and acknowledged sends complete
    }
    r.lastAck = header.ack;
    completeAll(completed);
  }
  if (!isMessage(header.type)) {
    slot.control.resize(header.length);
    return slot.control.data();
  }
  const uint64_t received = p.received.load(std::memory_order_relaxed);
  if (header.seq < received || (header.seq < received + kWindow && seen(r.seen, header.seq))) {
    slot.duplicate = true;  // replayed after a link failure, but it had arrived: dropped
    return nullptr;
  }
  if (header.seq >= received + kWindow) throw std::runtime_error("sequence number out of window");
  // The peer replays a chunk only after taking the link it was on down; if that link is still
  // writing it here, it is stale: take it down before the replay writes the same bytes.
  for (auto& other : p.links) {
    if (other.get() != &link && other->readingSeq == header.seq) {
      linkDown(peer, other->index, "its chunk came again on another link", /*quiet=*/true);
    }
  }
  link.readingSeq = header.seq;
  if (header.message > r.nextKnown) {
    if (header.message - r.nextKnown > kWindow)
      throw std::runtime_error("message id out of window");
    r.stashedBytes += header.length;
    if (r.stashedBytes > kMaxStashedBytes) throw std::runtime_error("too many chunks ahead");
    slot.stashing = true;
    slot.pending.header = header;
    slot.pending.bytes.resize(header.length);
    return slot.pending.bytes.data();
  }
  Incoming* message = knownMessage(peer, header);
  if (message->type == FrameType::kWrite) return pinChunk(slot, *message, header);
  return message->data == nullptr ? nullptr : message->data + header.offset;
}

void TcpTransport::onFrame(int peer, Link& link, const FrameHeader& header) {
  Receiving& r = receiving_[peer];
  Receiving::Slot& slot = r.slots[link.index];
  if (header.type == FrameType::kBye) {
    // Everything the peer wrote on this link came before its goodbye; other links may still
    // hold some, so the peer is gone only once every link closed.
    peers_[peer]->saidBye = true;
    return closedAfterBye(peer, link.index);
  }
  if (!isMessage(header.type)) {
    std::string text(slot.control.begin(), slot.control.end());
    slot.control.clear();
    return onControl(peer, header, text);
  }
  link.readingSeq = UINT64_MAX;
  unpin(slot);  // the payload is in place
  if (slot.duplicate) return;
  link.chunksReceived.fetch_add(1, std::memory_order_relaxed);
  Peer& p = *peers_[peer];
  // The chunk is ours: record it and move the cumulative acknowledgement past what is complete.
  const uint64_t bit = header.seq % kWindow;
  r.seen[bit / 64] |= uint64_t{1} << (bit % 64);
  uint64_t received = p.received.load(std::memory_order_relaxed);
  while (seen(r.seen, received)) {
    const uint64_t at = received % kWindow;
    r.seen[at / 64] &= ~(uint64_t{1} << (at % 64));
    ++received;
  }
  p.received.store(received, std::memory_order_release);
  if (slot.stashing) {
    r.stash.push_back(std::move(slot.pending));
    slot.pending = {};
    slot.stashing = false;
    // Its predecessors may have become known while its payload was arriving (on other links).
    return drainStash(peer);
  }
  chunkArrived(peer, *knownMessage(peer, header), header.length);
  drainStash(peer);
}

TcpTransport::Incoming* TcpTransport::knownMessage(int peer, const FrameHeader& header) {
  Receiving& r = receiving_[peer];
  if (header.message == r.nextKnown) matchMessage(peer, header);
  if (header.message < r.base) throw std::runtime_error("chunk of a finished message");
  Incoming& message = r.incoming[header.message - r.base];
  if (message.total != header.total || !(message.tag == tagOf(header)) || message.done ||
      message.type != header.type || message.key != header.key || message.target != header.target) {
    throw std::runtime_error("chunk disagrees with its message");
  }
  return &message;
}

void TcpTransport::matchMessage(int peer, const FrameHeader& header) {
  Receiving& r = receiving_[peer];
  Incoming in;
  in.tag = tagOf(header);
  in.total = header.total;
  in.type = header.type;
  in.id = header.message;
  in.key = header.key;
  in.target = header.target;
  if (header.type == FrameType::kWrite) {
    admitWrite(peer, in);
  } else if (header.type == FrameType::kWriteAck) {
    in.answer.resize(header.total);  // bounded by validateHeader
  } else {
    std::lock_guard<std::mutex> guard(mutex_);
    PostedReceive matched;
    const auto match = receives_.matchPostedLocked(peer, in.tag, in.total, &matched);
    if (match == ReceiveQueues::Match::kMatched) {
      in.request = std::move(matched.request);
      in.data = matched.data;
    }
    if (match != ReceiveQueues::Match::kNone) {
      completed_.notify_all();  // a failed match leaves in.data null: the message is discarded
    } else {
      in.unexpected = receives_.addUnexpectedLocked(peer, in.tag, in.total);
      in.data = in.unexpected->data.data();
    }
  }
  r.incoming.push_back(std::move(in));
  Incoming& placed = r.incoming.back();
  if (placed.type == FrameType::kWriteAck) placed.data = placed.answer.data();  // after the move
  ++r.nextKnown;
}

void TcpTransport::chunkArrived(int peer, Incoming& message, uint64_t length) {
  Receiving& r = receiving_[peer];
  message.got += length;
  if (message.got < message.total) return;
  message.done = true;
  // The sender of a large message waits for its acknowledgement; small ones completed once
  // written, and their acknowledgement can ride on later traffic or the heartbeat. A writer
  // waits for it whatever the size.
  if (message.total > kInlineBytes || message.type == FrameType::kWrite) r.ackDue = true;
  if (message.type == FrameType::kWrite) writeLanded(peer, message);
  if (message.type == FrameType::kWriteAck) writeAnswered(peer, message);
  RequestPtr waiter;
  UnexpectedPtr entry = message.unexpected;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (message.request) {
      if (!message.request->done()) message.request->completeLocked(peer);
    } else if (entry) {
      waiter = receives_.arrivedLocked(entry);
    }
    completed_.notify_all();
  }
  if (waiter) ReceiveQueues::deliver(entry, waiter, entry->waiterData, mutex_, completed_);
  while (!r.incoming.empty() && r.incoming.front().done) {
    r.incoming.pop_front();
    ++r.base;
  }
}

void TcpTransport::drainStash(int peer) {
  Receiving& r = receiving_[peer];
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t i = 0; i < r.stash.size(); ++i) {
      if (r.stash[i].header.message > r.nextKnown) continue;
      Stashed chunk = std::move(r.stash[i]);
      r.stash[i] = std::move(r.stash.back());
      r.stash.pop_back();
      r.stashedBytes -= chunk.header.length;
      Incoming* message = knownMessage(peer, chunk.header);
      if (message->type == FrameType::kWrite) {
        landStashed(*message, chunk);
      } else if (message->data != nullptr && !chunk.bytes.empty()) {
        std::memcpy(message->data + chunk.header.offset, chunk.bytes.data(), chunk.bytes.size());
      }
      chunkArrived(peer, *message, chunk.header.length);
      progress = true;
      break;
    }
  }
}

void TcpTransport::closedAfterBye(int peer, int index) {
  linkDown(peer, index, "the peer closed it on purpose", /*quiet=*/true);
  Peer& p = *peers_[peer];
  {
    std::lock_guard<std::mutex> guard(p.sendMutex);
    if (p.failed || p.upLinks() > 0) return;
  }
  failPeer(peer,
           Error(ErrorKind::kPeerFailure,
                 detail::concat("rank ", peer,
                                " closed its connections (the process exited, was killed, "
                                "or aborted)")),
           false);
}

void TcpTransport::onControl(int peer, const FrameHeader& header, const std::string& text) {
  switch (header.type) {
    case FrameType::kAbort:
      failPeer(peer,
               Error(ErrorKind::kPeerFailure,
                     detail::concat("rank ", peer, " aborted the communicator: ", text)),
               true);
      return;
    case FrameType::kStatusQuery:
      sendControl(peer, FrameType::kStatusReply, header.tagSeq, status_.answer());
      return;
    case FrameType::kStatusReply: status_.reply(peer, header.tagSeq, text); return;
    default: return;  // acknowledgements were taken in onHeader
  }
}

}  // namespace xccl::net::tcp
