// Pure index arithmetic shared by the kernels and the host: how elements are split across ranks
// and blocks, and how a block's range splits into a scalar head, 16-byte vectors and a scalar
// tail. Compiled by the host compiler too, so all of it is unit-tested on CPU
// (tests/cpp/gpu/test_partition.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__) || defined(__HIP__)
#define XCCL_HOST_DEVICE __host__ __device__
#else
#define XCCL_HOST_DEVICE
#endif

namespace xccl::kernels {

constexpr size_t kVectorBytes = 16;  // one ld.global.v4.u32 / global_load_dwordx4 per access

struct Range {
  size_t begin;
  size_t end;
  XCCL_HOST_DEVICE size_t size() const { return end - begin; }
};

// Part `index` of `parts` contiguous, balanced parts of [0, count). Every boundary is a multiple
// of `granule` (except `count` itself), so parts of a 16-byte aligned array start 16-byte aligned
// when granule is one vector. Balanced: part sizes differ by at most one granule; parts beyond the
// data are empty.
XCCL_HOST_DEVICE inline Range splitEven(size_t count, size_t parts, size_t index, size_t granule) {
  const size_t granules = (count + granule - 1) / granule;
  const size_t base = granules / parts;
  const size_t extra = granules % parts;
  const size_t first = index * base + (index < extra ? index : extra);
  const size_t last = first + base + (index < extra ? 1 : 0);
  const size_t begin = first * granule;
  const size_t end = last * granule;
  return Range{begin < count ? begin : count, end < count ? end : count};
}

// Misalignment (address mod 16) shared by a set of pointers, folded one pointer at a time:
// start with misalignmentOf(first), then merge the others; -1 once two of them differ.
XCCL_HOST_DEVICE inline int misalignmentOf(const void* p) {
  return static_cast<int>(reinterpret_cast<uintptr_t>(p) % kVectorBytes);
}
XCCL_HOST_DEVICE inline int mergeMisalignment(int common, const void* p) {
  return common == misalignmentOf(p) ? common : -1;
}

// How `count` elements of `elemSize` bytes, starting at pointers with common misalignment
// `misalignment` (-1: none in common), split into head elements (scalar, until every pointer is
// 16-byte aligned), whole vectors, and tail elements (scalar). Without a common alignment, or
// when it is not a multiple of the element size, everything is head: correct, just slower.
struct VectorSplit {
  size_t head;     // elements
  size_t vectors;  // 16-byte vectors of kVectorBytes / elemSize elements each
  size_t tail;     // elements
};
XCCL_HOST_DEVICE inline VectorSplit splitForVectors(int misalignment, size_t count,
                                                    size_t elemSize) {
  if (misalignment < 0 || misalignment % elemSize != 0) return VectorSplit{count, 0, 0};
  size_t head = misalignment == 0 ? 0 : (kVectorBytes - misalignment) / elemSize;
  if (head > count) head = count;
  const size_t perVector = kVectorBytes / elemSize;
  const size_t vectors = (count - head) / perVector;
  return VectorSplit{head, vectors, count - head - vectors * perVector};
}

// Two-shot all-reduce: the slice of the count elements that `rank` reduces (stage 1) and that
// every rank then gathers from it (stage 2). Vector-granular, so slices of an aligned buffer stay
// aligned; with fewer vectors than ranks the high ranks get empty slices.
XCCL_HOST_DEVICE inline Range twoShotSlice(size_t count, int worldSize, int rank, size_t elemSize) {
  return splitEven(count, static_cast<size_t>(worldSize), static_cast<size_t>(rank),
                   kVectorBytes / elemSize);
}

// The part of `range` that block `block` of `blocks` handles. Depends only on the range and the
// grid, never on pointer alignment: in two-shot, block b of rank q reads exactly the elements that
// block b of rank s wrote, which is what makes their per-block flag pair a sufficient barrier.
XCCL_HOST_DEVICE inline Range blockPart(Range range, int blocks, int block, size_t elemSize) {
  const Range part = splitEven(range.size(), static_cast<size_t>(blocks),
                               static_cast<size_t>(block), kVectorBytes / elemSize);
  return Range{range.begin + part.begin, range.begin + part.end};
}

}  // namespace xccl::kernels
