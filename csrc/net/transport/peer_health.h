// What a transport knows about its peers' failures and its own abort: the errors new requests
// fail with, what peerFailed() and status queries report. One per transport (tcp, shm, ofi).
//
// Not locked itself: every method needs the owning transport's mutex (the one that guards its
// matching state and request completion) held, so that a failure is recorded and the requests
// it fails are failed in one step, as seen by any other thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "net/transport/transport.h"

namespace xccl::net {

class PeerHealth {
 public:
  explicit PeerHealth(int size) : peerError_(size) {}

  // The error a new request with `peer` (may be kAnySource) in `space` fails with at once, or
  // null: an abort refuses everything, a peer that aborted the communicator every collective,
  // a failed peer its own traffic.
  const Error* refusalLocked(int peer, TagSpace space) const;
  // Records that `peer` failed with `error` (the first error is kept); `failAllCollectives`
  // (the peer aborted the communicator): every collective is refused from now on as well.
  void markFailedLocked(int peer, const Error& error, bool failAllCollectives);
  // Records abort() with `reason`; false when the transport was already aborted (nothing
  // changes). failAllLocked records another cause of the same state (a stopped progress thread).
  bool abortLocked(const std::string& reason);
  void failAllLocked(const Error& error);

  const Error* abortedLocked() const { return abortError_.get(); }
  const Error* peerErrorLocked(int peer) const { return peerError_[peer].get(); }
  // Transport::peerFailed: the abort's error, else the peer's own.
  bool failedLocked(int peer, std::string* why) const;

 private:
  std::vector<std::unique_ptr<Error>> peerError_;  // index = peer; set once the peer failed
  std::unique_ptr<Error> collectiveError_;         // set once a peer aborted the communicator
  std::unique_ptr<Error> abortError_;              // set once abort() ran (or all failed)
};

}  // namespace xccl::net
