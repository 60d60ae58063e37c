#include "net/transport/tcp/message_receiver.h"

#include "common/logging.h"

namespace xccl::net::tcp {

// One peer's ReceiveOwner: where its messages land, and what their completion means. A peer
// that must fail (it announced more than this rank keeps for it) fails once its state is done
// with the frame: failing clears that state.
class MessageReceiver::Receiver final : public ReceiveOwner {
 public:
  Receiver(MessageReceiver& receiver, int peer) : r_(receiver), peer_(peer) {}
  void open(Incoming& message) override { r_.openMessage(peer_, message, &failure_); }
  uint8_t* landWrite(int link, Incoming& message, const FrameHeader& header) override {
    return r_.writes_.pinChunk(r_.receiving_[peer_].slots[link], message, header);
  }
  void landStashedWrite(Incoming& message, const Stashed& chunk) override {
    r_.writes_.landStashed(message, chunk);
  }
  void complete(Incoming& message) override { r_.messageArrived(peer_, message); }
  void dropLink(int link) override {
    r_.owner_.linkDown(peer_, link, "its chunk came again on another link", /*quiet=*/true);
  }
  // After the state is done with the frame; true when the peer failed.
  bool failIfRefused() {
    if (!failure_) return false;
    r_.owner_.losePeer(peer_, *failure_);
    return true;
  }

 private:
  MessageReceiver& r_;
  const int peer_;
  std::optional<Error> failure_;
};

uint8_t* MessageReceiver::onHeader(int peer, Link& link, const FrameHeader& header) {
  Receiving& r = receiving_[peer];
  Peer& p = *peers_[peer];
  if (header.ack > r.lastAck()) {
    std::vector<RequestPtr> completed;
    {
      std::lock_guard<std::mutex> guard(p.sendMutex);
      r.acknowledged(header.ack, p.nextSeq);  // throws for chunks never sent
      sender_.acknowledgedLocked(p, header.ack, &completed);
    }
    owner_.complete(completed);
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

void MessageReceiver::onFrame(int peer, Link& link, const FrameHeader& header) {
  Receiving& r = receiving_[peer];
  Receiving::Slot& slot = r.slots[link.index];
  if (header.type == FrameType::kBye) {
    // Everything the peer wrote on this link came before its goodbye; other links may still
    // hold some, so the peer is gone only once every link closed.
    peers_[peer]->saidBye = true;
    return owner_.closedAfterBye(peer, link.index);
  }
  if (!isMessage(header.type)) {
    std::string text(slot.control.begin(), slot.control.end());
    slot.control.clear();
    return owner_.onControl(peer, header, text);
  }
  writes_.unpin(slot);  // the payload is in place
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
void MessageReceiver::openMessage(int peer, Incoming& in, std::optional<Error>* failure) {
  if (in.type == FrameType::kWrite) return writes_.admitWrite(peer, in);
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

void MessageReceiver::messageArrived(int peer, Incoming& message) {
  if (message.type == FrameType::kWrite) writes_.writeLanded(peer, message);
  if (message.type == FrameType::kWriteAck) writes_.writeAnswered(peer, message);
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

void MessageReceiver::addPeer(int peer, int links) {
  receiving_[peer].seen.assign(kWindow / 64, 0);
  receiving_[peer].slots.resize(links);
}

void MessageReceiver::abandonSlot(int peer, int index) {
  Receiving::Slot& slot = receiving_[peer].slots[index];
  writes_.unpin(slot);  // the chunk it was reading into registered memory is abandoned
  slot = {};
}

void MessageReceiver::abandonSlots(int peer) {
  for (auto& slot : receiving_[peer].slots) writes_.unpin(slot);
}

void MessageReceiver::failAllLocked(const Error& error) {
  receives_.failLocked(error, [](int, const MessageTag&) { return true; });
  for (auto& r : receiving_) {
    for (auto& message : r.incoming) {
      if (message.request) message.request->failLocked(error);
    }
    r.incoming.clear();
  }
}

}  // namespace xccl::net::tcp
