// The single-copy bodies of the shm collectives: every rank publishes where its buffer lies, and
// peers copy straight out of it with process_vm_readv (net/regions/shm/cma.h), or out of its pool
// when the buffer is a pool tensor, instead of the slots' copy in and copy out. Protocol, ordering
// and bytes moved: docs/shm.md, "Single copy between processes".
#include <algorithm>
#include <cstring>
#include <vector>

#include "algo/reduce.h"
#include "algo/shm_steps.h"
#include "common/error.h"

namespace xccl::algo::shm::detail {
namespace {

// Bytes of each peer's part that one reduction round reads into scratch: small enough that the
// n - 1 parts, this rank's own and the result stay in a core's L2 cache with 2-4 ranks, large
// enough that a process_vm_readv call (~1-2 us) is small beside its copy.
constexpr size_t kChunkBytes = size_t{128} << 10;

// Every rank's words of the first step: its pool offset + 1 (0: not in its pool) and its
// buffer's address.
struct Buffers {
  std::vector<uint64_t> direct;
  std::vector<uint64_t> address;
};

// The first step of every single-copy collective. The words are written like the slot of the
// step's parity (after beginWriting's wait, before the publish) and read right after the wait
// for all, before any rank can reach step + 2 and rewrite them (the slot-reuse invariant). The
// publish also releases this rank's earlier writes to the buffer, so a peer that acquired it
// reads final data. `pool`: a buffer in this rank's pool is announced as such (no syscall).
Buffers publishBuffers(const Context& ctx, Steps& steps, const void* buffer, size_t bytes,
                       bool pool) {
  net::shm::Segment& segment = ctx.segment;
  const uint32_t step = steps.beginWriting();
  const uint64_t direct = pool ? directWord(segment, buffer, bytes) : 0;
  if (direct != 0) ++segment.traffic().directCalls;
  segment.setDirect(step, direct);
  segment.setAddress(step, reinterpret_cast<uintptr_t>(buffer));
  steps.publish(step);
  steps.waitAll(step);
  Buffers buffers{std::vector<uint64_t>(ctx.size()), std::vector<uint64_t>(ctx.size())};
  for (int r = 0; r < ctx.size(); ++r) {
    buffers.direct[r] = segment.directOf(r, step);
    buffers.address[r] = segment.addressOf(r, step);
  }
  return buffers;
}

// Copies `length` bytes at `at` of rank r's buffer into `local`. The length is always ours; a
// peer's bad address fails with kPeerFailure (cma.cc), writing nothing beyond `local`.
void fetch(const Context& ctx, const Buffers& buffers, int r, size_t at, void* local,
           size_t length) {
  if (length == 0) return;
  net::shm::Traffic& traffic = ctx.segment.traffic();
  if (buffers.direct[r] != 0) {
    std::memcpy(local, ctx.segment.pool()->of(r, buffers.direct[r] - 1 + at, length), length);
    traffic.direct += length;
    return;
  }
  try {
    ctx.segment.cma()->read(ctx.what, r, buffers.address[r] + at, local, length);
  } catch (const Error&) {
    ctx.segment.blamePeer(r);  // the peers waiting for this rank learn it (markBroken)
    throw;
  }
  traffic.cma += length;
}

// dest[0, count) = the reduction, in rank order 0..n-1 with reduceMany (so bitwise what the
// slot path gives), of elements [at, at + count) of every rank's buffer, this rank's own read
// from `own`. Peers' elements arrive a chunk at a time in a per-thread scratch.
void reduceFrom(const Context& ctx, const Buffers& buffers, DataType type, ReduceOp op,
                const uint8_t* own, uint8_t* dest, size_t at, size_t count) {
  const int n = ctx.size(), me = ctx.rank();
  const size_t elem = elementSize(type);
  const size_t perChunk = elementsIn(kChunkBytes, elem);
  thread_local std::vector<uint8_t> scratch;  // kept: a fresh one would fault its pages in
  if (scratch.size() < n * perChunk * elem) scratch.resize(n * perChunk * elem);
  std::vector<const void*> srcs(n);
  for (size_t base = 0; base < count; base += perChunk) {
    const size_t len = std::min(perChunk, count - base);
    const size_t offset = at + base * elem;
    for (int r = 0; r < n; ++r) {
      if (r == me) {
        srcs[r] = own + offset;
      } else if (buffers.direct[r] != 0) {
        srcs[r] = ctx.segment.pool()->of(r, buffers.direct[r] - 1 + offset, len * elem);
        ctx.segment.traffic().direct += len * elem;
      } else {
        uint8_t* part = scratch.data() + r * perChunk * elem;
        fetch(ctx, buffers, r, offset, part, len * elem);
        srcs[r] = part;
      }
    }
    reduceMany(type, combinerOf(op), dest + base * elem, srcs.data(), n, len);
    if (op == ReduceOp::kAvg) divide(type, dest + base * elem, len, n);
  }
}

// all_reduce's first half: every rank's slice reduced in place, through the slots. A chunk at a
// time, each rank copies its elements of every peer's slice into that peer's block of its slot
// (a user-space copy: cheaper than a peer's process_vm_readv, which pins each page it reads);
// then each rank reduces its chunk from its own buffer and the peers' blocks, in rank order with
// reduceMany (so bitwise what the slot path gives). reduce_scatter moves its blocks the same way.
void reduceScatterInPlace(const Context& ctx, Steps& steps, uint8_t* data, size_t count,
                          DataType type, ReduceOp op) {
  const int n = ctx.size(), me = ctx.rank();
  const size_t elem = elementSize(type);
  const size_t block = elementsIn(steps.slotBytes() / n, elem);
  XCCL_CHECK(block > 0, "shared-memory slots of ", steps.slotBytes(), " bytes are too small for ",
             n, " ranks");
  std::vector<Slice> slices(n);
  size_t longest = 0;
  for (int r = 0; r < n; ++r) {
    slices[r] = sliceOf(count, elem, n, r);
    longest = std::max(longest, slices[r].length);
  }
  const Slice mine = slices[me];
  net::shm::Traffic& traffic = ctx.segment.traffic();
  std::vector<const void*> srcs(n);
  // The same number of steps on every rank: the longest slice's chunks.
  for (size_t base = 0; base < longest; base += block) {
    const uint32_t step = steps.beginWriting();
    for (int r = 0; r < n; ++r) {
      if (r == me || base >= slices[r].length) continue;
      const size_t len = std::min(block, slices[r].length - base);
      std::memcpy(steps.mine(step) + r * block * elem, data + (slices[r].offset + base) * elem,
                  len * elem);
      traffic.staged += len * elem;
    }
    steps.publish(step);
    steps.waitAll(step);
    if (base >= mine.length) continue;
    const size_t len = std::min(block, mine.length - base);
    uint8_t* dest = data + (mine.offset + base) * elem;
    for (int r = 0; r < n; ++r) srcs[r] = r == me ? dest : steps.of(r, step) + me * block * elem;
    reduceMany(type, combinerOf(op), dest, srcs.data(), n, len);
    if (op == ReduceOp::kAvg) divide(type, dest, len, n);
  }
}

}  // namespace

bool usesSingleCopy(const Context& ctx, Collective collective, size_t bytes) {
  return ctx.segment.cma() != nullptr && bytes >= ctx.tunables.shmCmaMinBytes.of(collective);
}

// all_reduce (root < 0): two-shot in place. Step 1 publishes the buffers; then rank r reduces
// slice r into its own buffer: up to kShmCmaStagedReduceMaxBytes through the slots
// (reduceScatterInPlace: one step per slot's worth), above it reading the peers' parts of it
// with process_vm_readv (reduceFrom; peers meanwhile read other slices of it: disjoint).
// The next step says every slice is final; each rank copies every peer's slice out of that peer's
// buffer, the single copy. The last step (release) keeps every buffer alive until nobody reads
// it. reduce (root >= 0): the root reduces the whole message from every buffer while the others
// wait in the release step.
void reduceSingleCopy(const Context& ctx, uint8_t* data, size_t count, DataType type, ReduceOp op,
                      int root) {
  Steps steps(ctx);
  const int n = ctx.size(), me = ctx.rank();
  const size_t elem = elementSize(type);
  const Buffers buffers = publishBuffers(ctx, steps, data, count * elem, false);
  if (root >= 0) {
    if (me == root) reduceFrom(ctx, buffers, type, op, data, data, 0, count);
    steps.release();
    return;
  }
  if (count * elem <= kShmCmaStagedReduceMaxBytes) {
    reduceScatterInPlace(ctx, steps, data, count, type, op);
  } else {
    const Slice mine = sliceOf(count, elem, n, me);
    reduceFrom(ctx, buffers, type, op, data, data + mine.offset * elem, mine.offset * elem,
               mine.length);
  }
  const uint32_t reduced = steps.begin();
  steps.publish(reduced);
  steps.waitAll(reduced);
  for (int r = 0; r < n; ++r) {
    if (r == me) continue;
    const Slice slice = sliceOf(count, elem, n, r);
    fetch(ctx, buffers, r, slice.offset * elem, data + slice.offset * elem, slice.length * elem);
  }
  steps.release();
}

// One step: each rank copies every peer's part straight into its output, then the release step.
void allGatherSingleCopy(const Context& ctx, const uint8_t* input, uint8_t* output,
                         const std::vector<size_t>& bytesPerRank) {
  Steps steps(ctx);
  const Buffers buffers = publishBuffers(ctx, steps, input, bytesPerRank[ctx.rank()], true);
  size_t offset = 0;
  for (int r = 0; r < ctx.size(); ++r) {
    if (r != ctx.rank()) fetch(ctx, buffers, r, 0, output + offset, bytesPerRank[r]);
    offset += bytesPerRank[r];
  }
  steps.release();
}

// One step: the others copy the root's buffer, then the release step.
void broadcastSingleCopy(const Context& ctx, uint8_t* data, size_t bytes, int root) {
  Steps steps(ctx);
  const Buffers buffers = publishBuffers(ctx, steps, data, bytes, false);
  if (ctx.rank() != root) fetch(ctx, buffers, root, 0, data, bytes);
  steps.release();
}

}  // namespace xccl::algo::shm::detail
