#include "algo/ring.h"

#include <algorithm>
#include <optional>

#include "algo/reduce.h"
#include "algo/scratch.h"

namespace xccl::algo {
namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

Segments Segments::even(size_t count, size_t elementSize, int parts) {
  Segments s;
  size_t base = count / parts, extra = count % parts, at = 0;
  for (int i = 0; i < parts; ++i) {
    size_t elems = base + (static_cast<size_t>(i) < extra ? 1 : 0);
    s.offset.push_back(at * elementSize);
    s.length.push_back(elems * elementSize);
    at += elems;
  }
  return s;
}

Segments Segments::of(const std::vector<size_t>& lengths) {
  Segments s;
  size_t at = 0;
  for (size_t len : lengths) {
    s.offset.push_back(at);
    s.length.push_back(len);
    at += len;
  }
  return s;
}

size_t Segments::maxLength() const {
  return length.empty() ? 0 : *std::max_element(length.begin(), length.end());
}

std::vector<RingStep> ringReduceSteps(int rank, int size, int shift) {
  std::vector<RingStep> steps;
  for (int s = 0; s < size - 1; ++s) {
    steps.push_back({mod(rank + shift - s, size), mod(rank + shift - s - 1, size), true});
  }
  return steps;
}

std::vector<RingStep> ringGatherSteps(int rank, int size, int shift) {
  std::vector<RingStep> steps;
  for (int s = 0; s < size - 1; ++s) {
    steps.push_back({mod(rank + shift - s, size), mod(rank + shift - s - 1, size), false});
  }
  return steps;
}

void runRing(const Context& ctx, uint8_t* data, const Segments& segments,
             const std::vector<RingStep>& steps, DataType type, ReduceOp combiner) {
  const int n = ctx.size();
  const int right = (ctx.rank() + 1) % n, left = (ctx.rank() + n - 1) % n;
  const size_t steps_count = steps.size();
  if (steps_count == 0) return;
  const size_t elem = elementSize(type);
  const size_t chunkBytes = std::max(elem, ctx.tunables.ringChunkBytes / elem * elem);
  const size_t maxSeg = segments.maxLength();
  const size_t chunks = std::max<size_t>(1, (maxSeg + chunkBytes - 1) / chunkBytes);
  auto chunkOffset = [&](size_t k, int seg) {
    return std::min(k * chunkBytes, segments.length[seg]);
  };
  auto chunkLength = [&](size_t k, int seg) {
    return std::min((k + 1) * chunkBytes, segments.length[seg]) - chunkOffset(k, seg);
  };
  auto stepTag = [&](size_t t, size_t k) { return static_cast<uint32_t>(t * chunks + k); };

  // Reducing steps land in scratch, double-buffered by step parity: step t+1's receives are
  // posted while step t's chunks are still being reduced. Only the parities a reducing step
  // uses are taken (two ranks have one reducing step), kept by this thread between calls.
  std::optional<KeptScratch> scratch[2];
  for (size_t t = 0; t < steps_count; ++t) {
    if (steps[t].reduce && !scratch[t % 2]) scratch[t % 2].emplace(static_cast<int>(t % 2), maxSeg);
  }

  std::vector<std::vector<net::RequestPtr>> recvs(steps_count);
  std::vector<std::vector<net::RequestPtr>> readingSegment(n);  // sends still reading a segment
  std::vector<net::RequestPtr> allSends;

  // A segment may only be overwritten once every send reading it has finished.
  auto settle = [&](int seg) {
    if (readingSegment[seg].empty()) return;
    ctx.wait(readingSegment[seg]);
    readingSegment[seg].clear();
  };
  auto post = [&](size_t t) {
    const RingStep& step = steps[t];
    if (!step.reduce) settle(step.recvSegment);
    for (size_t k = 0; k < chunks; ++k) {
      size_t off = chunkOffset(k, step.recvSegment);
      uint8_t* dst = step.reduce ? scratch[t % 2]->data() + off
                                 : data + segments.offset[step.recvSegment] + off;
      recvs[t].push_back(ctx.irecv(left, stepTag(t, k), dst, chunkLength(k, step.recvSegment)));
    }
  };
  auto send = [&](size_t t, size_t k) {
    int seg = steps[t].sendSegment;
    auto r = ctx.isend(right, stepTag(t, k), data + segments.offset[seg] + chunkOffset(k, seg),
                       chunkLength(k, seg));
    readingSegment[seg].push_back(r);
    allSends.push_back(std::move(r));
  };

  post(0);
  for (size_t k = 0; k < chunks; ++k) send(0, k);
  for (size_t t = 0; t < steps_count; ++t) {
    if (t + 1 < steps_count) post(t + 1);
    const RingStep& step = steps[t];
    if (step.reduce) settle(step.recvSegment);
    for (size_t k = 0; k < chunks; ++k) {
      ctx.wait({recvs[t][k]});
      if (step.reduce) {
        size_t off = chunkOffset(k, step.recvSegment), len = chunkLength(k, step.recvSegment);
        reduceInto(type, combiner, data + segments.offset[step.recvSegment] + off,
                   scratch[t % 2]->data() + off, len / elem);
      }
      if (t + 1 < steps_count) send(t + 1, k);
    }
  }
  ctx.wait(allSends);
}

}  // namespace xccl::algo
