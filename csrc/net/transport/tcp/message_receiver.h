// The TCP transport's receiving side (progress thread): every frame a link reads, into the
// transport. Chunks go into receives: messages from one peer are matched in the order the peer
// sent them (message ids), whatever link their chunks came on, so FIFO per (source, tag) holds; a
// chunk of a message whose predecessors have not shown up yet is stashed (copied) until they
// have (the bookkeeping is receive_state.h's). The peer's acknowledgements move the sending
// side's window; its goodbye and control frames go to the transport (Owner).
// Its state is its own: each peer's ReceiveState (progress thread only, no lock) and the posted
// and unexpected receives (guarded by the transport's mutex_). It never holds mutex_ and a peer's
// sendMutex together (the transport's lock order: mutex_, then sendMutex).
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "net/transport/peer_health.h"
#include "net/transport/receive_queues.h"
#include "net/transport/tcp/chunk_sender.h"
#include "net/transport/tcp/memory.h"
#include "net/transport/tcp/peer.h"
#include "net/transport/tcp/receive_state.h"
#include "net/transport/tcp/wire.h"

namespace xccl::net::tcp {

class MessageReceiver {
 public:
  // What the receiving side asks of the transport it serves.
  class Owner {
   public:
    virtual ~Owner() = default;
    // Completes those of `requests` not done yet and wakes the waiters (takes mutex_).
    virtual void complete(const std::vector<RequestPtr>& requests) = 0;
    // `peer` sent what this rank cannot accept: it fails (TransportBase::failPeer).
    virtual void losePeer(int peer, const Error& error) = 0;
    // Takes link `index` to `peer` down (the progress loop's linkDown).
    virtual void linkDown(int peer, int index, const std::string& why, bool quiet) = 0;
    // The peer's control frame (abort, status query or reply), its payload `text`.
    virtual void onControl(int peer, const FrameHeader& header, const std::string& text) = 0;
    // A link closed after the peer said goodbye: once none is left, the peer is gone.
    virtual void closedAfterBye(int peer, int index) = 0;
  };
  // Feeds one link's frames to the receiving side (FrameReader::advance).
  class LinkFrames final : public FrameSink {
   public:
    LinkFrames(MessageReceiver& receiver, int peer, Link& link)
        : receiver_(receiver), peer_(peer), link_(link) {}
    uint8_t* onHeader(const FrameHeader& header) override {
      return receiver_.onHeader(peer_, link_, header);
    }
    void onFrame(const FrameHeader& header) override { receiver_.onFrame(peer_, link_, header); }

   private:
    MessageReceiver& receiver_;
    const int peer_;
    Link& link_;
  };

  // `mutex` and `completed` are the transport's (TransportBase); past `maxUnexpectedBytes` of
  // messages that came before their receive, a peer fails.
  MessageReceiver(Peers& peers, uint64_t maxUnexpectedBytes, std::mutex& mutex,
                  std::condition_variable& completed, ChunkSender& sender, OneSidedWrites& writes,
                  Owner& owner)
      : peers_(peers),
        receiving_(peers.size()),
        maxUnexpectedBytes_(maxUnexpectedBytes),
        mutex_(mutex),
        completed_(completed),
        sender_(sender),
        writes_(writes),
        owner_(owner) {}
  MessageReceiver(const MessageReceiver&) = delete;
  MessageReceiver& operator=(const MessageReceiver&) = delete;

  // While the mesh is built: `peer` has `links` links.
  void addPeer(int peer, int links);
  // Transport::irecv once its arguments are checked (ReceiveQueues::receive).
  void receive(const RequestPtr& request, uint8_t* data, const PeerHealth& health) {
    receives_.receive(request, data, health, mutex_, completed_);
  }

  // Progress thread. Link `index` to `peer` is new: its slot starts empty.
  void resetSlot(int peer, int index) { receiving_[peer].slots[index] = {}; }
  // Link `index` went down: the chunk it was reading into registered memory is abandoned.
  void abandonSlot(int peer, int index);
  // The peer failed and its links are closed: no chunk is read into registered memory any more.
  void abandonSlots(int peer);
  // A message completed whose sender waits for its acknowledgement; ackSent() once sent.
  bool ackDue(int peer) const { return receiving_[peer].ackDue; }
  void ackSent(int peer) { receiving_[peer].ackDue = false; }

  // With mutex_ held: `peer` failed; its messages arriving and the receives `covers(from, tag)`
  // holds for fail with `error`.
  template <typename Covers>
  void failPeerLocked(int peer, const Error& error, Covers covers);
  // With mutex_ held: every receive fails with `error`.
  void failAllLocked(const Error& error);

 private:
  using Receiving = ReceiveState;
  class Receiver;  // the ReceiveOwner of one peer's state

  uint8_t* onHeader(int peer, Link& link, const FrameHeader& header);
  void onFrame(int peer, Link& link, const FrameHeader& header);
  void openMessage(int peer, Incoming& message, std::optional<Error>* failure);
  void messageArrived(int peer, Incoming& message);

  Peers& peers_;
  std::vector<Receiving> receiving_;  // index = peer; progress thread only
  const uint64_t maxUnexpectedBytes_;  // per peer, of messages that came before their receive
  std::mutex& mutex_;
  std::condition_variable& completed_;
  ChunkSender& sender_;
  OneSidedWrites& writes_;
  Owner& owner_;
  ReceiveQueues receives_;  // guarded by mutex_
};

template <typename Covers>
void MessageReceiver::failPeerLocked(int peer, const Error& error, Covers covers) {
  Receiving& r = receiving_[peer];
  for (auto& message : r.incoming) {
    if (message.request) message.request->failLocked(error);
  }
  r.clear();
  receives_.failLocked(error, covers);
}

}  // namespace xccl::net::tcp
