#include "algo/tunables.h"

#include "common/env.h"
#include "common/error.h"

namespace xccl::algo {

Tunables Tunables::fromEnvironment() {
  Tunables t;
  t.smallMessageBytes = static_cast<size_t>(env::getInt("XCCL_SMALL_MSG_BYTES"));
  const int64_t chunk = env::getInt("XCCL_RING_CHUNK_BYTES");
  XCCL_CHECK_ARG(chunk >= 4096, "XCCL_RING_CHUNK_BYTES must be at least 4096, got ", chunk);
  t.ringChunkBytes = static_cast<size_t>(chunk);
  t.forced = parseAlgorithm(env::getString("XCCL_ALGO"));
  if (!env::getString("XCCL_SHM_TWO_SHOT_BYTES").empty()) {
    const int64_t bytes = env::getInt("XCCL_SHM_TWO_SHOT_BYTES");
    XCCL_CHECK_ARG(bytes >= 0, "XCCL_SHM_TWO_SHOT_BYTES must not be negative, got ", bytes);
    t.shmTwoShotMinBytes = static_cast<size_t>(bytes);
  }
  // The registry checked every number against its cap (1 TiB); never is kNoLimit.
  for (const auto& [collective, bytes] : env::getBytesPerCollective("XCCL_SHM_CMA_MIN_BYTES")) {
    t.shmCmaMinBytes.set(collective, bytes == env::kNever ? kNoLimit : static_cast<size_t>(bytes));
  }
  t.gpuForced = parseGpuForce(env::getString("XCCL_GPU_ALGO"));
  t.gpuWorkspaceBytes = static_cast<size_t>(env::getInt("XCCL_GPU_WORKSPACE_BYTES"));
  return t;
}

size_t ShmCmaMinBytes::of(Collective collective) const {
  switch (collective) {
    case Collective::kAllReduce: return allReduce;
    case Collective::kReduce: return reduce;
    case Collective::kAllGather: return allGather;
    case Collective::kBroadcast: return broadcast;
    default: return kNoLimit;
  }
}

void ShmCmaMinBytes::set(Collective collective, size_t bytes) {
  switch (collective) {
    case Collective::kAllReduce: allReduce = bytes; return;
    case Collective::kReduce: reduce = bytes; return;
    case Collective::kAllGather: allGather = bytes; return;
    case Collective::kBroadcast: broadcast = bytes; return;
    default: XCCL_THROW(ErrorKind::kInternal, vocab::name(collective), " has no single-copy path");
  }
}

void ShmCmaMinBytes::setAll(size_t bytes) {
  for (Collective collective : vocab::kShmSingleCopyCollectives) set(collective, bytes);
}

Algorithm parseAlgorithm(const std::string& name) {
  if (name.empty()) return Algorithm::kAuto;
  std::string accepted;
  for (const vocab::AlgorithmRow& row : vocab::kAlgorithmRows) {
    if (!row.forceable) continue;
    if (name == row.name) return row.id;
    accepted += (accepted.empty() ? "" : ", ") + std::string(row.name);
  }
  XCCL_THROW(ErrorKind::kInvalidArgument, "unknown algorithm '", name, "' (XCCL_ALGO accepts ",
             accepted, ")");
}

const char* algorithmName(Algorithm algorithm) { return vocab::name(algorithm); }

GpuForce parseGpuForce(const std::string& name) {
  if (name.empty()) return GpuForce::kAuto;
  std::string accepted;
  for (const vocab::GpuForceRow& row : vocab::kGpuForceRows) {
    if (name == row.name) return row.id;
    accepted += (accepted.empty() ? "" : ", ") + std::string(row.name);
    for (const char* synonym : row.synonyms) {
      if (synonym == nullptr) continue;
      if (name == synonym) return row.id;
      accepted += ", " + std::string(synonym);
    }
  }
  XCCL_THROW(ErrorKind::kInvalidArgument, "unknown GPU algorithm '", name,
             "' (XCCL_GPU_ALGO accepts ", accepted, ")");
}

const char* gpuForceName(GpuForce force) { return vocab::name(force); }

std::string formatBytes(size_t bytes) {
  if (bytes == kNoLimit) return "no limit";
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= kKiB && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " B";
}

}  // namespace xccl::algo
