// What one collective call carries through the algorithms: the transport, the tag space its
// messages live in, the deadline every wait is bounded by, the tunables, and the algorithm
// planCpu (algo/cpu_plan.h) chose for it, which the algorithms execute (algorithmFor).
#pragma once

#include <string>
#include <vector>

#include "algo/cpu_plan.h"
#include "net/transport/transport.h"

namespace xccl::algo {

// Step numbers from here up are free for a phase that follows a ring (whose steps are numbered
// from 0), so the two phases' messages can never be confused.
constexpr uint32_t kSecondPhaseStep = 0x80000000u;

struct Context {
  net::Transport& transport;
  uint64_t seq;              // the collective's sequence number (same on every rank)
  std::string what;          // "allreduce #12", used in every error message
  net::Deadline deadline;
  Tunables tunables;
  // The plan's network algorithm (kDirect or kRing), set by algo::Runner; kAuto where a caller
  // runs a network collective without a Runner (tests, benchmarks): see plannedAlgorithm.
  Algorithm algorithm = Algorithm::kAuto;
  // Set by each collective of collectives.h on its own copy (as()): travels in every message
  // tag, so ranks running different collectives at one sequence number fail instead of mixing.
  uint32_t op = 0;

  int rank() const { return transport.rank(); }
  // What runs `collective` of `bytes` per rank (as CpuRequest wants them) over this context.
  Algorithm algorithmFor(Collective collective, size_t bytes) const {
    return plannedAlgorithm(algorithm, CpuRoute::kNet, collective, bytes, size(), tunables);
  }
  int size() const { return transport.size(); }
  net::MessageTag tag(uint32_t step) const { return {net::TagSpace::kCollective, step, seq, op}; }
  // This context, its messages tagged as belonging to the collective `signature`.
  Context as(uint32_t signature) const {
    Context stamped = *this;
    stamped.op = signature;
    return stamped;
  }
  net::RequestPtr isend(int peer, uint32_t step, const void* data, size_t bytes) const {
    return transport.isend(peer, tag(step), data, bytes);
  }
  net::RequestPtr irecv(int peer, uint32_t step, void* data, size_t bytes) const {
    return transport.irecv(peer, tag(step), data, bytes);
  }
  void wait(const std::vector<net::RequestPtr>& requests) const {
    transport.wait(requests, deadline, what);
  }
};

// The context of the i-th of several collectives run under one call (coalesced operations):
// the caller reserved consecutive sequence numbers, so each gets its own tag space.
inline Context subCollective(const Context& ctx, size_t i) {
  Context sub = ctx;
  sub.seq += i;
  return sub;
}

}  // namespace xccl::algo
