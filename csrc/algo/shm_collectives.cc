// The reducing shm collectives: all_reduce, reduce, reduce_scatter.
#include "algo/shm_collectives.h"

#include <cstring>

#include "algo/reduce.h"
#include "algo/shm_steps.h"
#include "common/error.h"

namespace xccl::algo::shm {
namespace {

using detail::Steps;

// One chunk at a time (a chunk fills a slot). One-shot, one step per chunk: every rank copies
// its chunk into its slot, and each receiving rank reduces all n slots in rank order.
// Two-shot, two steps per chunk: after the copy, rank r reduces slice r of all n slots into its
// other slot (free: everyone reached the copy step), then each receiving rank copies the n
// reduced slices. AVG's division happens where the reduction does, on the same values, so the
// bytes are the same as dividing afterwards. root < 0: every rank receives.
void reduceChunks(const Context& ctx, uint8_t* data, size_t count, DataType type, ReduceOp op,
                  int root, bool twoShot) {
  Steps steps(ctx);
  const int n = ctx.size(), me = ctx.rank();
  const size_t elem = elementSize(type);
  const size_t perChunk = steps.slotBytes() / elem;
  const ReduceOp combiner = combinerOf(op);
  const bool receiving = root < 0 || root == me;
  std::vector<const void*> srcs(n);
  for (size_t base = 0; base < count; base += perChunk) {
    const size_t len = std::min(perChunk, count - base);
    uint8_t* chunk = data + base * elem;
    const uint32_t in = steps.beginWriting();
    std::memcpy(steps.mine(in), chunk, len * elem);
    steps.publish(in);
    if (!twoShot) {
      if (!receiving) continue;
      steps.waitAll(in);
      for (int r = 0; r < n; ++r) srcs[r] = steps.of(r, in);
      reduceMany(type, combiner, chunk, srcs.data(), n, len);
      if (op == ReduceOp::kAvg) divide(type, chunk, len, n);
      continue;
    }
    steps.waitAll(in);
    const detail::Slice mine = detail::sliceOf(len, elem, n, me);
    const uint32_t out = steps.beginWriting();
    for (int r = 0; r < n; ++r) srcs[r] = steps.of(r, in) + mine.offset * elem;
    reduceMany(type, combiner, steps.mine(out), srcs.data(), n, mine.length);
    if (op == ReduceOp::kAvg) divide(type, steps.mine(out), mine.length, n);
    steps.publish(out);
    if (!receiving) continue;
    steps.waitAll(out);
    for (int r = 0; r < n; ++r) {
      const detail::Slice slice = detail::sliceOf(len, elem, n, r);
      std::memcpy(chunk + slice.offset * elem, steps.of(r, out), slice.length * elem);
    }
  }
}

// The plan's reduction for this call (Context::algorithm; plannedAlgorithm where none).
bool usesTwoShot(const Context& ctx, Collective collective, size_t bytes) {
  return plannedAlgorithm(ctx.algorithm, CpuRoute::kShm, collective, bytes, ctx.size(),
                          ctx.tunables) == Algorithm::kTwoShot;
}

}  // namespace

namespace detail {

void throwMismatch(const std::string& what, int rank, uint32_t step, uint64_t mine,
                   uint64_t theirs) {
  const auto op = [](uint64_t word) { return static_cast<uint32_t>(word >> 32) & 0xffffff; };
  const auto collective = [](uint64_t word) { return static_cast<int>(word >> 56); };
  if (collective(theirs) != collective(mine)) {
    XCCL_THROW(ErrorKind::kPeerFailure, what, ": rank ", rank, " reached step ", step,
               " in shared memory while still in an earlier collective (",
               describeOpSignature(op(theirs)),
               "): the ranks called different collectives (or "
               "with different sizes) before this one");
  }
  if (op(theirs) != op(mine)) {
    XCCL_THROW(ErrorKind::kPeerFailure, what, ": rank ", rank, " ran ",
               describeOpSignature(op(theirs)), " where this rank ran ",
               describeOpSignature(op(mine)),
               ": the ranks called different collectives (or with "
               "different dtypes or reduce ops) in the same order position");
  }
  XCCL_THROW(ErrorKind::kPeerFailure, what, ": rank ", rank, " ran ", describeOpSignature(op(mine)),
             " with different sizes (or root) than this rank: the ranks called the collective "
             "with mismatched arguments");
}

}  // namespace detail

void allReduce(const Context& ctx, void* data, size_t count, DataType type, ReduceOp op) {
  if (ctx.size() == 1 || count == 0) return;  // AVG over one rank divides by one
  const bool twoShot = usesTwoShot(ctx, Collective::kAllReduce, count * elementSize(type));
  const bool single =
      detail::usesSingleCopy(ctx, Collective::kAllReduce, count * elementSize(type));
  const detail::Signature signature{opSignature(CollectiveKind::kAllReduce, type, op),
                                    detail::shapeOf({count, twoShot, single})};
  detail::run(ctx, signature, [&] {
    auto* p = static_cast<uint8_t*>(data);
    if (single) return detail::reduceSingleCopy(ctx, p, count, type, op, -1);
    reduceChunks(ctx, p, count, type, op, -1, twoShot);
  });
}

void reduce(const Context& ctx, void* data, size_t count, DataType type, ReduceOp op, int root) {
  if (ctx.size() == 1 || count == 0) return;
  const bool twoShot = usesTwoShot(ctx, Collective::kReduce, count * elementSize(type));
  const bool single = detail::usesSingleCopy(ctx, Collective::kReduce, count * elementSize(type));
  const detail::Signature signature{opSignature(CollectiveKind::kReduce, type, op),
                                    detail::shapeOf(
                                        {count, twoShot, static_cast<uint64_t>(root), single})};
  detail::run(ctx, signature, [&] {
    auto* p = static_cast<uint8_t*>(data);
    if (single) return detail::reduceSingleCopy(ctx, p, count, type, op, root);
    reduceChunks(ctx, p, count, type, op, root, twoShot);
  });
}

// Per step, every rank puts its sub-chunk of each other rank's block into its slot (n parts of
// slot/n bytes) and reduces sub-chunk `rank` of every slot, its own taken straight from input.
// A rank whose input lies in its pool publishes its offset in the first step instead (setDirect)
// and copies nothing: the others take their sub-chunks of its input from its pool in every step,
// in one step for the whole count when every rank did so, and a final release step keeps the
// owners from returning while a peer still reads (docs/shm.md, "Tensors in the pool").
void reduceScatter(const Context& ctx, const void* input, void* output, size_t count, DataType type,
                   ReduceOp op) {
  const int n = ctx.size(), me = ctx.rank();
  const size_t elem = elementSize(type);
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  if (n == 1) {
    if (count > 0 && out != in) std::memmove(out, in, count * elem);
    return;
  }
  if (count == 0) return;
  // No single-copy variant: the slots already carry each block once (copied in by its owner,
  // reduced straight from the slot), and process_vm_readv's copy is no cheaper (docs/shm.md).
  const detail::Signature signature{opSignature(CollectiveKind::kReduceScatter, type, op),
                                    detail::shapeOf({count})};
  detail::run(ctx, signature, [&] {
    Steps steps(ctx);
    const size_t perBlock = detail::elementsIn(steps.slotBytes() / n, elem);
    XCCL_CHECK(perBlock > 0, "shared-memory slots of ", steps.slotBytes(),
               " bytes are too small for ", n, " ranks");
    const ReduceOp combiner = combinerOf(op);
    net::shm::Traffic& traffic = ctx.segment.traffic();
    const uint64_t myWord = detail::directWord(ctx.segment, in, n * count * elem);
    if (myWord != 0) ++traffic.directCalls;
    std::vector<uint64_t> direct(n);  // every rank's word, read in the first step
    bool anyDirect = false;
    std::vector<const void*> srcs(n);
    for (size_t base = 0; base < count;) {
      size_t len = std::min(perBlock, count - base);
      const uint32_t step = steps.beginWriting();
      if (base == 0) ctx.segment.setDirect(step, myWord);
      for (int b = 0; b < n && myWord == 0; ++b) {
        if (b == me) continue;
        std::memcpy(steps.mine(step) + b * perBlock * elem, in + (b * count + base) * elem,
                    len * elem);
        traffic.staged += len * elem;
      }
      steps.publish(step);
      steps.waitAll(step);
      if (base == 0) {
        bool allDirect = true;
        for (int r = 0; r < n; ++r) {
          direct[r] = ctx.segment.directOf(r, step);
          anyDirect |= direct[r] != 0;
          allDirect &= direct[r] != 0;
        }
        if (allDirect) len = count;  // nobody staged anything: read every source in place
      }
      for (int r = 0; r < n; ++r) {
        const size_t at = (me * count + base) * elem;
        if (r == me) {
          srcs[r] = in + at;
        } else if (direct[r] != 0) {
          srcs[r] = ctx.segment.pool()->of(r, direct[r] - 1 + at, len * elem);
          traffic.direct += len * elem;
        } else {
          srcs[r] = steps.of(r, step) + me * perBlock * elem;
        }
      }
      reduceMany(type, combiner, out + base * elem, srcs.data(), n, len);
      if (op == ReduceOp::kAvg) divide(type, out + base * elem, len, n);
      base += len;
    }
    // Peers may read this rank's pool memory in every step, the last one included.
    if (anyDirect) steps.release();
  });
}

}  // namespace xccl::algo::shm
