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
  if (!env::getString("XCCL_SHM_CMA_MIN_BYTES").empty()) {
    t.shmCmaMinBytes = static_cast<size_t>(env::getInt("XCCL_SHM_CMA_MIN_BYTES"));
  }
  t.gpuForced = parseGpuForce(env::getString("XCCL_GPU_ALGO"));
  t.gpuWorkspaceBytes = static_cast<size_t>(env::getInt("XCCL_GPU_WORKSPACE_BYTES"));
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
    case Algorithm::kOneShot: return "one_shot";
    case Algorithm::kTwoShot: return "two_shot";
  }
  return "?";
}

GpuForce parseGpuForce(const std::string& name) {
  if (name.empty() || name == "auto") return GpuForce::kAuto;
  if (name == "nccl" || name == "rccl" || name == "vendor") return GpuForce::kVendor;
  if (name == "kernel") return GpuForce::kKernel;
  if (name == "one_shot") return GpuForce::kOneShot;
  if (name == "two_shot") return GpuForce::kTwoShot;
  if (name == "all_pairs") return GpuForce::kAllPairs;
  XCCL_THROW(ErrorKind::kInvalidArgument, "unknown GPU algorithm '", name,
             "' (XCCL_GPU_ALGO accepts auto, nccl, rccl, vendor, kernel, one_shot, two_shot, "
             "all_pairs)");
}

const char* gpuForceName(GpuForce force) {
  switch (force) {
    case GpuForce::kAuto: return "auto";
    case GpuForce::kVendor: return "nccl";
    case GpuForce::kKernel: return "kernel";
    case GpuForce::kOneShot: return "one_shot";
    case GpuForce::kTwoShot: return "two_shot";
    case GpuForce::kAllPairs: return "all_pairs";
  }
  return "?";
}

std::string formatBytes(size_t bytes) {
  if (bytes == kNoLimit) return "no limit";
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= kKiB && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " B";
}

}  // namespace xccl::algo
