// What the three transports that move bytes themselves (net/transport/tcp, net/transport/ofi,
// net/transport/shm_rings) share around their data paths: their rank and size, the mutex that
// guards matching state, peer health and request completion, the peers' health, the one-sided
// signals and the status board, the operations made only of those (peerFailed, setStatusProvider,
// iwaitWrite, the isend prologue, the plain wait), the handling of the control protocol
// (net/transport/control.h: onControl, with sending behind a hook), and the order in which a
// failure takes requests down (failPeer, failEverythingLocked), with each engine's own requests
// behind a hook. The transports that join others (RoutedTransport, SubsetTransport) forward
// instead.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "net/transport/control.h"
#include "net/transport/one_sided.h"
#include "net/transport/peer_health.h"
#include "net/transport/status_board.h"
#include "net/transport/transport.h"
#include "net/transport/wire_tag.h"

namespace xccl::net {

class TransportBase : public Transport {
 public:
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void setStatusProvider(std::function<std::string()> provider) override;
  bool peerFailed(int peer, std::string* why) override;
  RequestPtr iwaitWrite(int peer, uint64_t signal, Completion onDone = nullptr) override;
  // Sleeps on completed_ until every request is done or `deadline` (waitForRequests).
  void wait(const std::vector<RequestPtr>& requests, Deadline deadline,
            const std::string& what) override;

 protected:
  // Which requests a peer's failure takes down: those with the peer and, when the failure left
  // the ranks' collective state unknown (a collective message lost), every collective one.
  struct PeerLoss {
    int peer;
    bool allCollectives;
    bool covers(int from, TagSpace space) const {
      return from == peer || (allCollectives && space == TagSpace::kCollective);
    }
  };
  TransportBase(int rank, int size)
      : rank_(rank), size_(size), health_(size), status_(rank, size, mutex_, completed_) {}

  // Throws kInvalidArgument unless this transport carries traffic with `peer`; `sending`: for
  // an isend, else for an iwaitWrite. By default every other rank of the group.
  virtual void checkPeer(int peer, bool sending) const;
  // The isend prologue: checks `peer`, makes the send request and, when health_ refuses new
  // traffic with `peer` in `tag.space`, fails it at once (`*refused` set; the caller returns it).
  RequestPtr newSend(int peer, MessageTag tag, size_t bytes, Completion onDone, bool* refused);
  // A data message's wire header for `tag` and `bytes`, for the engines whose header holds the
  // message's size in `bytes` (ofi's Header, shm_rings' FrameHeader; their defaults say "data").
  template <typename Header>
  static Header dataHeader(const MessageTag& tag, uint64_t bytes) {
    Header header;
    header.tag = WireTag::encode(tag);
    header.bytes = bytes;
    return header;
  }
  // The control protocol (net/transport/control.h), the same on every engine. A control message
  // from `peer`, its header checked (WireControl::validate): an abort fails the peer with its
  // reason and, the peer's collective state being unknown, every collective in flight; a status
  // query is answered through sendControl with this rank's status provider; a reply goes to the
  // status board. Progress thread (shm_rings: its mailbox check); takes mutex_ itself.
  void onControl(int peer, ControlKind kind, uint64_t round, const std::string& text);
  // The engine's part of it: sends control message `kind` to `peer`, its text cut to what the
  // engine carries (at most kMaxControlBytes). Best effort and never throws for the peer's sake:
  // a peer that cannot be reached shows up as a failed peer. Called without mutex_.
  virtual void sendControl(int peer, ControlKind kind, uint64_t round, const std::string& text) = 0;

  // Completes those of `requests` not done yet (with their own peer as source) and wakes the
  // waiters. Takes mutex_.
  void completeAll(const std::vector<RequestPtr>& requests);

  // `peer` is gone (its links are down, or it sent what we cannot accept): logs `error`, refuses
  // new traffic with it (health_), and fails with `error` its sends in flight (dropPeer), the
  // engine's requests PeerLoss covers (failPeerLocked) and its one-sided signals, then wakes the
  // waiters. Takes mutex_ after dropPeer, which may take the engine's own locks first.
  void failPeer(int peer, const Error& error, bool failAllCollectives);
  // Fails every request in flight (failRequestsLocked) and every signal with `error`, and wakes
  // the waiters. Called with mutex_ held, once health_ refuses new traffic (abort, failAll).
  void failEverythingLocked(const Error& error);
  // failEverythingLocked after refusing all traffic: the progress thread stopped for good.
  void failAll(const Error& error);

  // failPeer's steps of each engine. dropPeer runs without mutex_: it takes the engine's hold on
  // `peer` down (links, queued frames) and returns the sends that were in flight to it.
  virtual std::vector<RequestPtr> dropPeer(int /*peer*/) { return {}; }
  // With mutex_ held: fails the engine's receives, writes and other requests that `loss` covers.
  virtual void failPeerLocked(const PeerLoss& loss, const Error& error) = 0;
  // With mutex_ held: fails every request the engine holds (failEverythingLocked).
  virtual void failRequestsLocked(const Error& error) = 0;

  const int rank_;
  const int size_;
  // Guards matching state, peer health and request completion; waiters sleep on completed_.
  std::mutex mutex_;
  std::condition_variable completed_;
  PeerHealth health_;
  StatusBoard status_;  // takes mutex_ itself
  WriteSignals signals_;  // one-sided writes' signals, waited for or arrived first
};

}  // namespace xccl::net
