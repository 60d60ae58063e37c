// The collectives over one host's shared-memory segment (net/regions/shm/segment.h), with the
// semantics and argument conventions of algo/collective_signatures.h: in-place all_reduce, AVG
// divides by the world size, PREMUL_SUM pre-multiplied by the caller (pass SUM), every rank gets
// bitwise-identical reductions (combined in rank order 0..n-1 with reduceMany, so bf16/fp16
// accumulate in fp32 and round once). Messages larger than a slot are pipelined in slot-sized
// chunks.
//
// Each function is collective: every rank of ctx.segment calls the same sequence of them with
// consistent sizes. Every wait is bounded by ctx.deadline (kTimeout naming the ranks that did not
// arrive) and checks ctx.alive (kPeerFailure naming a dead rank). After any error the segment
// refuses further collectives (kAborted): the group must be torn down.
// Steps and bytes moved: docs/shm.md.
#pragma once

#include <string>
#include <vector>

#include "algo/collective_signatures.h"
#include "algo/cpu_plan.h"
#include "common/types.h"
#include "net/regions/shm/segment.h"

namespace xccl::algo::shm {

struct Context {
  net::shm::Segment& segment;
  uint64_t seq;  // the collective's sequence number (for messages)
  std::string what;  // "allreduce #12", used in every error message
  net::Deadline deadline;
  Tunables tunables;
  net::shm::PeerAlive alive;  // may be empty
  // all_reduce and reduce: the plan's kOneShot or kTwoShot (algo/cpu_plan.h), set by
  // algo::Runner. kAuto where a caller runs them without a Runner (tests, benchmarks): planCpu
  // then plans them for this segment's ranks.
  Algorithm algorithm = Algorithm::kAuto;

  int rank() const { return segment.rank(); }
  int size() const { return segment.size(); }
};

// The signatures and semantics: collective_signatures.h. Here reduce leaves a non-root rank's
// `data` unchanged.
XCCL_COLLECTIVES(Context)

}  // namespace xccl::algo::shm
