// TcpTransport's receive path (progress thread): chunks from any link into receives. Messages
// from one peer are matched in the order the peer sent them (message ids), whatever link their
// chunks came on, so FIFO per (source, tag) holds; a chunk of a message whose predecessors have
// not shown up yet is stashed (copied) until they have. The bookkeeping is receive_state.h's.
#include <cstring>

#include "common/logging.h"
#include "net/transport/tcp/transport.h"

namespace xccl::net::tcp {

// One peer's ReceiveOwner: where its messages land, and what their completion means. A peer
// that must fail (it announced more than this rank keeps for it) fails once its state is done
// with the frame: failing clears that state.
class TcpTransport::Receiver final : public ReceiveOwner {
 public:
  Receiver(TcpTransport& transport, int peer) : t_(transport), peer_(peer) {}
  void open(Incoming& message) override { t_.openMessage(peer_, message, &failure_); }
  uint8_t* landWrite(int link, Incoming& message, const FrameHeader& header) override {
    return t_.pinChunk(t_.receiving_[peer_].slots[link], message, header);
  }
  void landStashedWrite(Incoming& message, const Stashed& chunk) override {
    t_.landStashed(message, chunk);
  }
  void complete(Incoming& message) override { t_.messageArrived(peer_, message); }
  void dropLink(int link) override {
    t_.linkDown(peer_, link, "its chunk came again on another link", /*quiet=*/true);
  }
  // After the state is done with the frame; true when the peer failed.
  bool failIfRefused() {
    if (!failure_) return false;
    t_.failPeer(peer_, *failure_, false);
    return true;
  }

 private:
  TcpTransport& t_;
  const int peer_;
  std::optional<Error> failure_;
};

uint8_t* TcpTransport::onHeader(int peer, Link& link, const FrameHeader& header) {
  Receiving& r = receiving_[peer];
  Peer& p = *peers_[peer];
  if (header.ack > r.lastAck()) {
    std::vector<RequestPtr> completed;
    {
      std::lock_guard<std::mutex> guard(p.sendMutex);
      r.acknowledged(header.ack, p.nextSeq);  // throws for chunks never sent
      p.acked = std::max(p.acked, header.ack);
      flushPeer(p, &completed);  // the window moved, and acknowledged sends complete
    }
    completeAll(completed);
  }
  Receiving::Slot& slot = r.slots[link.index];
  if (!isMessage(header.type)) {
    slot.control.resize(header.length);
    return slot.control.data();
  }
  Receiver receiver(*this, peer);
  uint8_t* at;
  try {
    at = r.chunkHeader(link.index, header, receiver);
  } catch (...) {
    receiver.failIfRefused();  // its message was refused before the chunk itself was
    throw;
  }
  return receiver.failIfRefused() ? nullptr : at;
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
  unpin(slot);  // the payload is in place
  if (!slot.reading) return;  // a duplicate, or its peer failed meanwhile
  link.chunksReceived.fetch_add(1, std::memory_order_relaxed);
  Receiver receiver(*this, peer);
  std::atomic<uint64_t>& received = peers_[peer]->received;
  try {
    r.chunkArrived(link.index, header, receiver);
  } catch (...) {
    received.store(r.received(), std::memory_order_release);  // what arrived before the refusal
    receiver.failIfRefused();
    throw;
  }
  received.store(r.received(), std::memory_order_release);
  receiver.failIfRefused();
}

// The first chunk of a message is known: where it lands.
void TcpTransport::openMessage(int peer, Incoming& in, std::optional<Error>* failure) {
  if (in.type == FrameType::kWrite) return admitWrite(peer, in);
  if (in.type == FrameType::kWriteAck) {
    in.answer.resize(in.total);  // bounded by validateHeader
    in.data = in.answer.data();
    return;
  }
  std::lock_guard<std::mutex> guard(mutex_);
  if (openReceiveLocked(receives_, peer, in, maxUnexpectedBytes_, "XCCL_NET_MAX_UNEXPECTED_BYTES",
                        failure)) {
    completed_.notify_all();
  }
}

void TcpTransport::messageArrived(int peer, Incoming& message) {
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
