// The collectives over any Transport. Each is collective: every rank of ctx.transport calls it
// with the same ctx.seq.
// Steps and bytes on the wire of each algorithm: docs/algorithms.md.
#pragma once

#include <vector>

#include "algo/collective_signatures.h"
#include "algo/context.h"
#include "common/types.h"

namespace xccl::algo {

// The signatures and semantics: collective_signatures.h. Here a non-root rank's `data` may be
// clobbered by reduce (used as scratch); barrier is a dissemination barrier (ceil(log2 n) rounds
// of empty messages).
XCCL_COLLECTIVES(Context)

}  // namespace xccl::algo
