// What the three transports that move bytes themselves (net/tcp, net/ofi, net/shm_rings) share
// around their data paths: their rank and size, the mutex that guards matching state, peer health
// and request completion, the peers' health, the one-sided signals and the status board, and the
// operations made only of those (peerFailed, setStatusProvider, iwaitWrite, the isend prologue).
// The transports that join others (RoutedTransport, SubsetTransport) forward instead.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "net/one_sided.h"
#include "net/peer_health.h"
#include "net/status_board.h"
#include "net/transport.h"

namespace xccl::net {

class TransportBase : public Transport {
 public:
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void setStatusProvider(std::function<std::string()> provider) override;
  bool peerFailed(int peer, std::string* why) override;
  RequestPtr iwaitWrite(int peer, uint64_t signal, Completion onDone = nullptr) override;

 protected:
  TransportBase(int rank, int size)
      : rank_(rank), size_(size), health_(size), status_(rank, size, mutex_, completed_) {}

  // Throws kInvalidArgument unless this transport carries traffic with `peer`; `sending`: for
  // an isend, else for an iwaitWrite. By default every other rank of the group.
  virtual void checkPeer(int peer, bool sending) const;
  // The isend prologue: checks `peer`, makes the send request and, when health_ refuses new
  // traffic with `peer` in `tag.space`, fails it at once (`*refused` set; the caller returns it).
  RequestPtr newSend(int peer, MessageTag tag, size_t bytes, Completion onDone, bool* refused);

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
