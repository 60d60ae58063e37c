#include "algo/tunables.h"

#include <vector>

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

namespace {

// XCCL_GPU_ALGO's names are its registry entry's (common/env.cc), one entry per GpuForce in the
// enum's order, synonyms after the canonical name ("nccl|rccl|vendor"): the one list of them.
const std::vector<std::vector<std::string>>& gpuForceSpellings() {
  static const std::vector<std::vector<std::string>> spellings = [] {
    std::vector<std::vector<std::string>> out;
    for (const std::string& entry : env::find("XCCL_GPU_ALGO").choices) {
      std::vector<std::string> names;
      for (size_t start = 0;;) {
        const size_t bar = entry.find('|', start);
        names.push_back(entry.substr(start, bar - start));
        if (bar == std::string::npos) break;
        start = bar + 1;
      }
      out.push_back(std::move(names));
    }
    XCCL_CHECK(out.size() == static_cast<size_t>(GpuForce::kAllPairs) + 1,
               "XCCL_GPU_ALGO declares ", out.size(), " choices, GpuForce has ",
               static_cast<int>(GpuForce::kAllPairs) + 1);
    return out;
  }();
  return spellings;
}

}  // namespace

GpuForce parseGpuForce(const std::string& name) {
  if (name.empty()) return GpuForce::kAuto;
  const auto& spellings = gpuForceSpellings();
  std::string accepted;
  for (size_t i = 0; i < spellings.size(); ++i) {
    for (const std::string& spelling : spellings[i]) {
      if (spelling == name) return static_cast<GpuForce>(i);
      accepted += (accepted.empty() ? "" : ", ") + spelling;
    }
  }
  XCCL_THROW(ErrorKind::kInvalidArgument, "unknown GPU algorithm '", name,
             "' (XCCL_GPU_ALGO accepts ", accepted, ")");
}

const char* gpuForceName(GpuForce force) {
  const auto& spellings = gpuForceSpellings();
  const auto index = static_cast<size_t>(force);
  return index < spellings.size() ? spellings[index].front().c_str() : "?";
}

std::string formatBytes(size_t bytes) {
  if (bytes == kNoLimit) return "no limit";
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes >= kKiB && bytes % kKiB == 0) return std::to_string(bytes / kKiB) + " KiB";
  return std::to_string(bytes) + " B";
}

}  // namespace xccl::algo
