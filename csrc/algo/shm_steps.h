// Internal to the shm collectives: one collective's view of the segment's steps, and the
// chunking arithmetic they share.
//
// The slot-reuse invariant (segment.h): every rank takes part in every step, in the same order,
// and publishes the step number once it wrote its data for that step (if any) and finished every
// read of earlier steps. A rank overwrites its slot of parity s & 1 only after every rank
// published s - 1 (beginWriting), i.e. after everybody finished reading what that slot held at
// step s - 2. Nobody can be more than one step ahead of a slow reader of its slot, so two slots
// per rank suffice, and a step may follow another one without any "done reading" round.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "algo/shm_collectives.h"
#include "common/types.h"

namespace xccl::algo::shm::detail {

// What identifies one collective call on every rank alike: its kind, dtype and reduce op
// (common/types.h opSignature) and a summary of its sizes and root (shapeOf). Ranks that called
// different collectives, or the same one with other sizes, would otherwise read each other's
// slots as if they held what they expect: shared memory has no frame headers to catch that.
struct Signature {
  uint32_t op;
  uint64_t shape;
};

// Folds the values into one shape summary (order matters).
inline uint64_t shapeOf(std::initializer_list<uint64_t> values) {
  uint64_t h = 0x243f6a8885a308d3ull;
  for (uint64_t v : values) h = (h ^ v) * 0x100000001b3ull + (h >> 29);
  return h;
}

// The word a rank publishes for its `collective`-th collective (Segment::setSignature): bits
// 56-63 the collective counter (mod 256), 32-55 the op signature, 0-31 the folded shape.
inline uint64_t signatureWord(uint64_t collective, const Signature& signature) {
  return (collective & 0xff) << 56 | (uint64_t{signature.op} & 0xffffff) << 32 |
         ((signature.shape ^ (signature.shape >> 32)) & 0xffffffffu);
}

// Throws kPeerFailure naming `rank` and both collectives: `theirs` (rank's word, seen once it
// reached `step` of this collective) says it runs another collective than `mine`.
[[noreturn]] void throwMismatch(const std::string& what, int rank, uint32_t step, uint64_t mine,
                                uint64_t theirs);

class Steps {
 public:
  // Constructed when the collective begins, after run() published its signature.
  explicit Steps(const Context& ctx)
      : segment_(ctx.segment),
        bounds_{ctx.deadline, ctx.what, ctx.alive},
        firstStep_(ctx.segment.step() + 1),
        mine_(ctx.segment.signatureOf(ctx.rank())) {}

  // The next step, in which this rank writes its slot: waits until that slot is free.
  uint32_t beginWriting() {
    const uint32_t step = segment_.nextStep();
    waitAll(step - 1);
    return step;
  }
  // The next step, in which this rank writes nothing (it still publishes it).
  uint32_t begin() { return segment_.nextStep(); }
  void publish(uint32_t step) { segment_.publish(step); }
  // Waits, then checks that the ranks waited for run the same collective (a wait for a step
  // of the previous collective, in beginWriting, has nothing to check).
  void waitAll(uint32_t step) {
    segment_.waitForAll(step, bounds_);
    for (int r = 0; r < segment_.size(); ++r) check(r, step);
  }
  void waitFor(int rank, uint32_t step) {
    segment_.waitFor(rank, step, bounds_);
    check(rank, step);
  }

  // A step in which every rank only says it finished reading: once it returns, every peer is done
  // with whatever this rank let it read in place (its pool memory) in the steps before.
  void release() {
    const uint32_t step = begin();
    publish(step);
    waitAll(step);
  }

  uint8_t* mine(uint32_t step) const { return segment_.slot(segment_.rank(), step); }
  const uint8_t* of(int rank, uint32_t step) const { return segment_.slot(rank, step); }
  size_t slotBytes() const { return segment_.slotBytes(); }

  // One step in which this rank copies `length` bytes (at most a slot) of `source` into its slot
  // and publishes them; the streaming rank's whole step in broadcast, gather and scatter.
  void write(const uint8_t* source, size_t length) {
    const uint32_t step = beginWriting();
    std::memcpy(mine(step), source, length);
    publish(step);
  }
  // Calls f(base, length) for each slot-sized window [base, base + length) of `total` bytes, in
  // order: one step (or more) per window, taken alike by every rank.
  template <typename F>
  void forEachWindow(size_t total, F f) {
    const size_t window = slotBytes();
    for (size_t base = 0; base < total; base += window) f(base, std::min(window, total - base));
  }

 private:
  // `rank` reached `step`. If that step belongs to this collective, rank published its word for
  // this collective or a later one (it stores the word before its first publish): equal words,
  // or a later collective, are fine; anything else means the ranks' sequences differ.
  void check(int rank, uint32_t step) const {
    if (static_cast<int32_t>(step - firstStep_) < 0) return;
    const uint64_t theirs = segment_.signatureOf(rank);
    if (theirs == mine_ || static_cast<int8_t>((theirs >> 56) - (mine_ >> 56)) > 0) return;
    throwMismatch(bounds_.what, rank, step, mine_, theirs);
  }

  net::shm::Segment& segment_;
  net::shm::WaitBounds bounds_;
  const uint32_t firstStep_;
  const uint64_t mine_;
};

// Runs one collective's body on a usable segment, publishing its signature first; a failure
// leaves the ranks' step counters out of agreement, so it marks the segment broken before passing
// the error on.
template <typename Body>
void run(const Context& ctx, const Signature& signature, Body body) {
  ctx.segment.checkUsable(ctx.what);
  try {
    ctx.segment.setSignature(signatureWord(ctx.segment.nextCollective(), signature));
    body();
  } catch (const std::exception& e) {
    ctx.segment.markBroken(e.what());
    throw;
  }
}

// The word a rank publishes with Segment::setDirect for an input of `bytes` at `data`: its offset
// in this rank's pool + 1 when the whole input lies there (peers may read it in place), else 0.
inline uint64_t directWord(const net::shm::Segment& segment, const void* data, size_t bytes) {
  const net::shm::Pool* pool = segment.pool().get();
  if (pool == nullptr || bytes == 0) return 0;
  const std::optional<size_t> offset = pool->offsetOf(data, bytes);
  return offset ? *offset + 1 : 0;
}

// Bytes of [base, base + window) that fall inside a part of `length` bytes.
inline size_t clip(size_t length, size_t base, size_t window) {
  return length > base ? std::min(window, length - base) : 0;
}

// Rank r's share of `count` elements cut into n slices of whole 64-byte units (so each rank's
// reduction starts on a cache line); the last ranks' slices may be shorter or empty.
struct Slice {
  size_t offset;  // elements
  size_t length;
};
inline Slice sliceOf(size_t count, size_t elementBytes, int n, int r) {
  const size_t unit = std::max<size_t>(1, 64 / elementBytes);
  const size_t units = (count + unit - 1) / unit;
  const size_t per = units / n, extra = units % n;
  const size_t first = r * per + std::min<size_t>(r, extra);
  const size_t end = std::min(count, (first + per + (static_cast<size_t>(r) < extra)) * unit);
  const size_t begin = std::min(count, first * unit);
  return {begin, end - begin};
}

// How many elements of `elementBytes` fit in `bytes`, in whole 64-byte units when at least one
// unit fits.
inline size_t elementsIn(size_t bytes, size_t elementBytes) {
  const size_t unit = std::max<size_t>(1, 64 / elementBytes);
  const size_t count = bytes / elementBytes;
  return count >= unit ? count / unit * unit : count;
}

// The single-copy path (shm_single_copy.cc): whether a call of `collective` of `bytes` (the whole
// message) takes it (its threshold in Tunables::shmCmaMinBytes), and its bodies, run inside run()
// like the slot bodies. root < 0: all_reduce.
bool usesSingleCopy(const Context& ctx, Collective collective, size_t bytes);
void reduceSingleCopy(const Context& ctx, uint8_t* data, size_t count, DataType type, ReduceOp op,
                      int root);
void allGatherSingleCopy(const Context& ctx, const uint8_t* input, uint8_t* output,
                         const std::vector<size_t>& bytesPerRank);
void broadcastSingleCopy(const Context& ctx, uint8_t* data, size_t bytes, int root);

}  // namespace xccl::algo::shm::detail
