#include "algo/select.h"

#include "common/env.h"
#include "common/error.h"

namespace xccl::algo {

Tunables Tunables::fromEnvironment() {
  Tunables t;
  t.smallMessageBytes = static_cast<size_t>(env::getInt("XCCL_SMALL_MSG_BYTES"));
  int64_t chunk = env::getInt("XCCL_RING_CHUNK_BYTES");
  XCCL_CHECK_ARG(chunk >= 4096, "XCCL_RING_CHUNK_BYTES must be at least 4096, got ", chunk);
  t.ringChunkBytes = static_cast<size_t>(chunk);
  t.forced = parseAlgorithm(env::getString("XCCL_ALGO"));
  return t;
}

Algorithm parseAlgorithm(const std::string& name) {
  if (name.empty() || name == "auto") return Algorithm::kAuto;
  if (name == "direct") return Algorithm::kDirect;
  if (name == "ring") return Algorithm::kRing;
  if (name == "shm") return Algorithm::kShm;
  XCCL_THROW(ErrorKind::kInvalidArgument, "unknown algorithm '", name,
             "' (XCCL_ALGO accepts auto, direct, ring, shm)");
}

const char* algorithmName(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kDirect: return "direct";
    case Algorithm::kRing: return "ring";
    case Algorithm::kShm: return "shm";
    case Algorithm::kHierarchical: return "hierarchical";
  }
  return "?";
}

Algorithm select(Collective collective, size_t bytes, int worldSize, const Tunables& tunables,
                 Locality locality) {
  bool hasRing = true;
  switch (collective) {
    case Collective::kAllToAll:
    case Collective::kGather:
    case Collective::kScatter:
    case Collective::kBarrier:
      hasRing = false;
      break;
    default:
      break;
  }
  const Algorithm forced = tunables.forced;
  if (forced == Algorithm::kDirect || (forced == Algorithm::kRing && hasRing)) return forced;
  if (locality == Locality::kOneHost) return Algorithm::kShm;
  if (locality == Locality::kPerHost && collective == Collective::kAllReduce) {
    return Algorithm::kHierarchical;
  }
  if (!hasRing) return Algorithm::kDirect;
  if (worldSize <= 2 && collective != Collective::kAllReduce) {
    // With two ranks a ring step is a direct exchange; direct saves the pipelining bookkeeping.
    return Algorithm::kDirect;
  }
  // Direct exchange moves (n-1) x bytes per rank instead of ~2 x bytes; it only pays while the
  // step count (latency) dominates, i.e. for small messages.
  return bytes <= tunables.smallMessageBytes ? Algorithm::kDirect : Algorithm::kRing;
}

}  // namespace xccl::algo
