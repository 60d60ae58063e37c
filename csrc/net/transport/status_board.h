// The status-query bookkeeping every transport shares (Transport::setStatusProvider and
// queryStatus): this rank's provider, and the replies to the latest query. The transport sends
// queries and replies as control messages (net/transport/control.h, TransportBase::onControl); this
// class decides whom to ask, keeps the answers and waits.
//
// Guarded by the owning transport's mutex, the one its completions notify `completed` under;
// each method takes it itself and never holds it while calling out (the provider, `send`).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "net/transport/peer_health.h"

namespace xccl::net {

class StatusBoard {
 public:
  // `mutex` and `completed` are the owner's and outlive this object.
  StatusBoard(int rank, int size, std::mutex& mutex, std::condition_variable& completed)
      : rank_(rank), replies_(size), mutex_(mutex), completed_(completed) {}

  void setProvider(std::function<std::string()> provider);
  // A query arrived: our provider's answer ("" without one). Called on the progress thread.
  std::string answer();
  // A reply from `peer` to query `round`: kept only for the latest query ("?" for an empty
  // answer, so that an empty slot still means "no reply"); wakes the querier.
  void reply(int peer, uint64_t round, const std::string& text);
  // Transport::queryStatus: asks every peer that `reaches` names (all but this rank when null)
  // and that `health` does not know to have failed, through `send(peer, round)` (called
  // without the mutex), none once the transport aborted; then waits for their replies until
  // `deadline`. `health` must be guarded by the same mutex.
  std::vector<std::string> query(Deadline deadline, const PeerHealth& health,
                                 const std::function<void(int, uint64_t)>& send,
                                 const std::function<bool(int)>& reaches = nullptr);

 private:
  const int rank_;
  std::function<std::string()> provider_;  // called outside the mutex
  std::vector<std::string> replies_;  // index = peer
  uint64_t round_ = 0;  // replies count only for the latest query
  std::mutex& mutex_;
  std::condition_variable& completed_;
};

}  // namespace xccl::net
