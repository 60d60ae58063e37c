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
#include <exception>

#include "algo/shm_collectives.h"

namespace xccl::algo::shm::detail {

class Steps {
 public:
  explicit Steps(const Context& ctx)
      : segment_(ctx.segment), bounds_{ctx.deadline, ctx.what, ctx.alive} {}

  // The next step, in which this rank writes its slot: waits until that slot is free.
  uint32_t beginWriting() {
    const uint32_t step = segment_.nextStep();
    segment_.waitForAll(step - 1, bounds_);
    return step;
  }
  // The next step, in which this rank writes nothing (it still publishes it).
  uint32_t begin() { return segment_.nextStep(); }
  void publish(uint32_t step) { segment_.publish(step); }
  void waitAll(uint32_t step) { segment_.waitForAll(step, bounds_); }
  void waitFor(int rank, uint32_t step) { segment_.waitFor(rank, step, bounds_); }

  uint8_t* mine(uint32_t step) const { return segment_.slot(segment_.rank(), step); }
  const uint8_t* of(int rank, uint32_t step) const { return segment_.slot(rank, step); }
  size_t slotBytes() const { return segment_.slotBytes(); }

 private:
  net::shm::Segment& segment_;
  net::shm::WaitBounds bounds_;
};

// Runs one collective's body on a usable segment; a failure leaves the ranks' step counters out
// of agreement, so it marks the segment broken before passing the error on.
template <typename Body>
void run(const Context& ctx, Body body) {
  ctx.segment.checkUsable(ctx.what);
  try {
    body();
  } catch (const std::exception& e) {
    ctx.segment.markBroken(e.what());
    throw;
  }
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

}  // namespace xccl::algo::shm::detail
