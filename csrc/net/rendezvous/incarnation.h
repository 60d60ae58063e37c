// Which incarnation of a job and which creation of a group a store key belongs to. A store never
// forgets: torch's elastic agent keeps one store across restarts and c10d's group prefixes start
// again from the same values, so without a scope of its own a restarted rank reads what the
// previous attempt's ranks published (addresses of dead listeners, unlinked segment names).
//
// Every key a group writes goes under Incarnation::prefix, which holds the launcher's scope
// (torchelastic's run id and restart count) and a token rank 0 draws for this one creation. How
// the other ranks learn that token without ever trusting an earlier creation's: docs/design.md,
// "Incarnations".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "net/rendezvous/store.h"

namespace xccl::net {

// "<run id>/<restart count>" from torchelastic's TORCHELASTIC_RUN_ID and
// TORCHELASTIC_RESTART_COUNT; "" when neither is set. The text comes from the environment, so it
// is reduced to [A-Za-z0-9._-] and at most 64 characters per part.
std::string launcherScope(const char* runId, const char* restartCount);
std::string launcherScopeFromEnvironment();

struct Incarnation {
  std::string prefix;  // every key of this creation: "xccl/inc/<scope>/<size>/<token>/"
  uint64_t token = 0;  // drawn by rank 0 for this creation; 0 for a shared (unscoped) one
  // Eight hex digits of the token for names outside the store (shared-memory files).
  std::string tag() const;
};

// Collective over `store`: every rank of one group creation calls it once, first thing, with the
// same scope and size. Each rank counts its creations on this store (an add on its own counter);
// rank 0 publishes a fresh token under its count, and the others read the token under theirs,
// then check that rank 0's count is theirs. Counts differ only when an earlier creation lost a
// rank before it counted: then this creation fails on every rank (kPeerFailure naming both counts
// here, a timeout naming the missing ranks in the next exchange elsewhere) and the counters are
// put back in step for the next one. Every wait ends by `timeout`.
Incarnation newIncarnation(Store& store, const std::string& scope, int rank, int size,
                           std::chrono::milliseconds timeout);

// The scope alone, for groups whose members join at different times (reconfigure): no token.
Incarnation sharedIncarnation(const std::string& scope);

// A Store that lies under an incarnation also derives from this, to name it outside the store.
class IncarnationTagged {
 public:
  virtual ~IncarnationTagged() = default;
  virtual std::string incarnationTag() const = 0;
};

// Incarnation::tag() of the creation `store` belongs to; "" for a store outside any (tests').
std::string incarnationTagOf(const Store& store);

}  // namespace xccl::net
