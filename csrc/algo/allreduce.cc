// all_reduce, reduce and reduce_scatter: the reducing collectives.
#include <cstring>

#include "algo/collectives.h"
#include "algo/reduce.h"
#include "algo/ring.h"
#include "algo/scratch.h"

namespace xccl::algo {
namespace {

// Every rank sends its whole buffer to every other rank (or to `root` only when root >= 0) and
// the receivers combine the contributions in rank order 0..n-1, so every rank's result is
// bitwise identical whatever the arrival order.
void directReduce(const Context& ctx, uint8_t* data, size_t count, DataType type, ReduceOp combiner,
                  int root) {
  const int n = ctx.size(), me = ctx.rank();
  const size_t bytes = count * elementSize(type);
  const bool receiving = root < 0 || root == me;
  ScratchBytes contributions(receiving ? bytes * n : 0);
  std::vector<net::RequestPtr> requests;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    if (receiving)
      requests.push_back(ctx.irecv(peer, 0, contributions.data() + peer * bytes, bytes));
    if (root < 0 || peer == root) requests.push_back(ctx.isend(peer, 0, data, bytes));
  }
  ctx.wait(requests);
  if (!receiving) return;
  std::memcpy(contributions.data() + me * bytes, data, bytes);
  std::memcpy(data, contributions.data(), bytes);
  for (int peer = 1; peer < n; ++peer) {
    reduceInto(type, combiner, data, contributions.data() + peer * bytes, count);
  }
}

void finishAverage(ReduceOp op, DataType type, void* data, size_t count, int size) {
  if (op == ReduceOp::kAvg) divide(type, data, count, size);
}

}  // namespace

void allReduce(const Context& caller, void* data, size_t count, DataType type, ReduceOp op) {
  const Context ctx = caller.as(opSignature(CollectiveKind::kAllReduce, type, op));
  const int n = ctx.size();
  const size_t bytes = count * elementSize(type);
  if (n > 1 && count > 0) {
    if (ctx.algorithmFor(Collective::kAllReduce, bytes) == Algorithm::kDirect) {
      directReduce(ctx, static_cast<uint8_t*>(data), count, type, combinerOf(op), -1);
    } else {
      std::vector<RingStep> steps = ringReduceSteps(ctx.rank(), n, 0);
      std::vector<RingStep> gather = ringGatherSteps(ctx.rank(), n, 1);
      steps.insert(steps.end(), gather.begin(), gather.end());
      runRing(ctx, static_cast<uint8_t*>(data), Segments::even(count, elementSize(type), n), steps,
              type, combinerOf(op));
    }
  }
  finishAverage(op, type, data, count, n);
}

void reduce(const Context& caller, void* data, size_t count, DataType type, ReduceOp op, int root) {
  const Context ctx = caller.as(opSignature(CollectiveKind::kReduce, type, op));
  const int n = ctx.size();
  const size_t elem = elementSize(type);
  if (n > 1 && count > 0) {
    if (ctx.algorithmFor(Collective::kReduce, count * elem) == Algorithm::kDirect) {
      directReduce(ctx, static_cast<uint8_t*>(data), count, type, combinerOf(op), root);
    } else {
      // Ring reduce-scatter (each rank ends up owning segment `rank`), then the root gathers
      // the segments: 2(n-1)/n of the message per rank on the wire instead of (n-1) at the root.
      Segments segments = Segments::even(count, elem, n);
      auto* bytes = static_cast<uint8_t*>(data);
      runRing(ctx, bytes, segments, ringReduceSteps(ctx.rank(), n, -1), type, combinerOf(op));
      const uint32_t step = kSecondPhaseStep;
      std::vector<net::RequestPtr> requests;
      if (ctx.rank() == root) {
        for (int peer = 0; peer < n; ++peer) {
          if (peer == root) continue;
          requests.push_back(
              ctx.irecv(peer, step, bytes + segments.offset[peer], segments.length[peer]));
        }
      } else {
        requests.push_back(ctx.isend(root, step, bytes + segments.offset[ctx.rank()],
                                     segments.length[ctx.rank()]));
      }
      ctx.wait(requests);
    }
  }
  if (ctx.rank() == root) finishAverage(op, type, data, count, n);
}

void reduceScatter(const Context& caller, const void* input, void* output, size_t count,
                   DataType type, ReduceOp op) {
  const Context ctx = caller.as(opSignature(CollectiveKind::kReduceScatter, type, op));
  const int n = ctx.size(), me = ctx.rank();
  const size_t elem = elementSize(type), bytes = count * elem;
  const auto* in = static_cast<const uint8_t*>(input);
  if (n > 1 && count > 0) {
    if (ctx.algorithmFor(Collective::kReduceScatter, bytes) == Algorithm::kDirect) {
      // Block p goes straight to rank p, which combines the blocks in rank order.
      ScratchBytes blocks(bytes * n);
      std::vector<net::RequestPtr> requests;
      for (int peer = 0; peer < n; ++peer) {
        if (peer == me) continue;
        requests.push_back(ctx.irecv(peer, 0, blocks.data() + peer * bytes, bytes));
        requests.push_back(ctx.isend(peer, 0, in + peer * bytes, bytes));
      }
      std::memcpy(blocks.data() + me * bytes, in + me * bytes, bytes);
      ctx.wait(requests);
      std::memcpy(output, blocks.data(), bytes);
      for (int peer = 1; peer < n; ++peer) {
        reduceInto(type, combinerOf(op), output, blocks.data() + peer * bytes, count);
      }
    } else {
      std::vector<uint8_t> work(in, in + bytes * n);
      runRing(ctx, work.data(), Segments::even(count * n, elem, n), ringReduceSteps(me, n, -1),
              type, combinerOf(op));
      std::memcpy(output, work.data() + me * bytes, bytes);
    }
  } else if (bytes > 0 && output != in + me * bytes) {
    std::memcpy(output, in + me * bytes, bytes);
  }
  finishAverage(op, type, output, count, n);
}

}  // namespace xccl::algo
