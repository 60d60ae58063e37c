#include "common/vocabulary.h"

#include <cstring>
#include <iterator>

namespace xccl::vocab {
namespace {

// Each table lists its enum's values in order, so that rowOf() is an index.
template <typename Row, size_t N>
constexpr bool inOrder(const Row (&rows)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(rows[i].id) != i) return false;
  }
  return true;
}
static_assert(inOrder(kCollectiveRows) && inOrder(kCpuRouteRows) && inOrder(kAlgorithmRows) &&
                  inOrder(kGpuCollectiveRows) && inOrder(kGpuRouteRows) &&
                  inOrder(kGpuKernelRows) && inOrder(kGpuForceRows) && inOrder(kLocalityRows),
              "a vocabulary table is out of its enum's order");
static_assert(std::size(kCollectiveRows) == static_cast<size_t>(Collective::kBarrier) + 1 &&
                  std::size(kAlgorithmRows) == static_cast<size_t>(Algorithm::kShm) + 1 &&
                  std::size(kGpuKernelRows) == static_cast<size_t>(GpuKernel::kBroadcast) + 1 &&
                  std::size(kGpuForceRows) == static_cast<size_t>(GpuForce::kAllPairs) + 1,
              "a vocabulary table misses a value of its enum");

template <typename Row, size_t N, typename Id>
const char* nameIn(const Row (&rows)[N], Id id) {
  const auto index = static_cast<size_t>(id);
  return index < N ? rows[index].name : "?";
}

template <typename Row, size_t N, typename Id>
bool find(const Row (&rows)[N], const char* text, Id* out) {
  for (const Row& row : rows) {
    if (std::strcmp(row.name, text) == 0) {
      *out = row.id;
      return true;
    }
  }
  return false;
}

}  // namespace

bool cpuLegal(Collective collective, CpuRoute route, Algorithm algorithm) {
  const CollectiveRow& c = rowOf(kCollectiveRows, collective);
  const AlgorithmRow& a = rowOf(kAlgorithmRows, algorithm);
  switch (route) {
    case CpuRoute::kNet: return a.kind == AlgorithmKind::kNetwork && (!a.needsRing || c.ring);
    case CpuRoute::kShm:
      return a.kind == (c.shmReduction ? AlgorithmKind::kShot : AlgorithmKind::kSegment);
    case CpuRoute::kHierarchical:
      return a.kind != AlgorithmKind::kPlanner &&
             (a.kind != AlgorithmKind::kShot || c.hostReduction);
  }
  return false;
}

const char* name(Collective c) { return nameIn(kCollectiveRows, c); }
const char* name(CpuRoute r) { return nameIn(kCpuRouteRows, r); }
const char* name(Algorithm a) { return nameIn(kAlgorithmRows, a); }
const char* name(GpuCollective c) { return nameIn(kGpuCollectiveRows, c); }
const char* name(GpuRoute r) { return nameIn(kGpuRouteRows, r); }
const char* name(GpuKernel k) { return nameIn(kGpuKernelRows, k); }
const char* name(GpuForce f) { return nameIn(kGpuForceRows, f); }
const char* name(Locality l) { return nameIn(kLocalityRows, l); }

const char* family(GpuKernel k) {
  const auto index = static_cast<size_t>(k);
  return index < std::size(kGpuKernelRows) ? kGpuKernelRows[index].family : "?";
}

bool lookup(const char* text, Collective* out) { return find(kCollectiveRows, text, out); }
bool lookup(const char* text, CpuRoute* out) { return find(kCpuRouteRows, text, out); }
bool lookup(const char* text, Algorithm* out) { return find(kAlgorithmRows, text, out); }
bool lookup(const char* text, GpuCollective* out) { return find(kGpuCollectiveRows, text, out); }
bool lookup(const char* text, GpuRoute* out) { return find(kGpuRouteRows, text, out); }
bool lookup(const char* text, Locality* out) { return find(kLocalityRows, text, out); }

bool hasKernel(GpuCollective collective) {
  for (const GpuKernelRow& k : kGpuKernelRows) {
    if (k.id != GpuKernel::kNone && k.collective == collective) return true;
  }
  return false;
}

bool kernelOf(GpuCollective collective, const char* family, GpuKernel* out) {
  *out = GpuKernel::kNone;
  for (const GpuKernelRow& k : kGpuKernelRows) {
    if (std::strcmp(k.family, family) != 0) continue;
    if (k.id == GpuKernel::kNone || k.collective == collective) {
      *out = k.id;
      return true;
    }
  }
  return false;
}

}  // namespace xccl::vocab
