// The data-movement shm collectives: all_gather, broadcast, gather, scatter, all_to_all,
// barrier. Each moves at most one slot per rank per step; a rank's own part never goes through
// its slot.
#include <algorithm>
#include <cstring>

#include "algo/shm_collectives.h"
#include "algo/shm_steps.h"
#include "common/error.h"

namespace xccl::algo::shm {

using detail::clip;
using detail::Steps;

// Step k carries bytes [kS, (k+1)S) of every rank's part (S = slot bytes). A rank whose input
// lies in its pool publishes its offset in the first step instead of copying it (setDirect):
// the others copy that rank's whole part straight from its pool in the first step, the remaining
// steps carry only the other ranks' windows, and a final release step keeps the owner from
// returning while a peer still reads its memory (docs/shm.md, "Tensors in the pool").
void allGather(const Context& ctx, const void* input, void* output,
               const std::vector<size_t>& bytesPerRank) {
  const int n = ctx.size(), me = ctx.rank();
  auto* out = static_cast<uint8_t*>(output);
  const auto* in = static_cast<const uint8_t*>(input);
  std::vector<size_t> offset(n);
  size_t maxLength = 0;
  for (int r = 1; r < n; ++r) offset[r] = offset[r - 1] + bytesPerRank[r - 1];
  for (size_t length : bytesPerRank) maxLength = std::max(maxLength, length);
  if (bytesPerRank[me] > 0 && out + offset[me] != in) {
    std::memmove(out + offset[me], in, bytesPerRank[me]);
  }
  if (n == 1 || maxLength == 0) return;
  detail::Signature signature{opSignature(CollectiveKind::kAllGather), 0};
  size_t total = 0;
  for (size_t length : bytesPerRank) {
    signature.shape = detail::shapeOf({signature.shape, length});
    total += length;
  }
  const bool single = detail::usesSingleCopy(ctx, Collective::kAllGather, total);
  signature.shape = detail::shapeOf({signature.shape, single});
  // From here `in` is read again: if it aliased our part, the memmove left it unchanged.
  detail::run(ctx, signature, [&] {
    if (single) return detail::allGatherSingleCopy(ctx, in, out, bytesPerRank);
    Steps steps(ctx);
    net::shm::Traffic& traffic = ctx.segment.traffic();
    const uint64_t myWord = detail::directWord(ctx.segment, in, bytesPerRank[me]);
    if (myWord != 0) ++traffic.directCalls;
    std::vector<uint64_t> direct(n);  // every rank's word, read in the first step
    const size_t window = steps.slotBytes();
    size_t stagedLength = maxLength;  // the longest part that goes through slots
    size_t base = 0;
    do {
      const uint32_t step = steps.beginWriting();
      if (base == 0) ctx.segment.setDirect(step, myWord);
      const size_t mine = myWord != 0 ? 0 : clip(bytesPerRank[me], base, window);
      if (mine > 0) std::memcpy(steps.mine(step), in + base, mine);
      traffic.staged += mine;
      steps.publish(step);
      steps.waitAll(step);
      if (base == 0) {
        stagedLength = 0;
        for (int r = 0; r < n; ++r) {
          direct[r] = ctx.segment.directOf(r, step);
          if (direct[r] == 0) stagedLength = std::max(stagedLength, bytesPerRank[r]);
          if (direct[r] == 0 || r == me || bytesPerRank[r] == 0) continue;
          const uint8_t* part = ctx.segment.pool()->of(r, direct[r] - 1, bytesPerRank[r]);
          std::memcpy(out + offset[r], part, bytesPerRank[r]);
          traffic.direct += bytesPerRank[r];
        }
      }
      for (int r = 0; r < n; ++r) {
        if (r == me || direct[r] != 0) continue;
        const size_t length = clip(bytesPerRank[r], base, window);
        if (length > 0) std::memcpy(out + offset[r] + base, steps.of(r, step), length);
      }
      base += window;
    } while (base < stagedLength);
    // Peers read pool memory in the first step only: a later step's wait already proves they
    // finished, so the release step is needed only when there was no later step.
    const bool anyDirect = std::any_of(direct.begin(), direct.end(), [](uint64_t w) { return w; });
    if (anyDirect && base == window) steps.release();
  });
}

void broadcast(const Context& ctx, void* data, size_t bytes, int root) {
  if (ctx.size() == 1 || bytes == 0) return;
  auto* p = static_cast<uint8_t*>(data);
  const bool single = detail::usesSingleCopy(ctx, Collective::kBroadcast, bytes);
  const detail::Signature signature{opSignature(CollectiveKind::kBroadcast),
                                    detail::shapeOf({bytes, static_cast<uint64_t>(root), single})};
  detail::run(ctx, signature, [&] {
    if (single) return detail::broadcastSingleCopy(ctx, p, bytes, root);
    Steps steps(ctx);
    steps.forEachWindow(bytes, [&](size_t base, size_t length) {
      if (ctx.rank() == root) {
        steps.write(p + base, length);
        return;
      }
      const uint32_t step = steps.begin();
      steps.publish(step);
      steps.waitFor(root, step);
      std::memcpy(p + base, steps.of(root, step), length);
    });
  });
}

void gather(const Context& ctx, const void* input, size_t bytes, void* output, int root) {
  const int n = ctx.size(), me = ctx.rank();
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  if (me == root && bytes > 0 && out + me * bytes != in) std::memmove(out + me * bytes, in, bytes);
  if (n == 1 || bytes == 0) return;
  const detail::Signature signature{opSignature(CollectiveKind::kGather),
                                    detail::shapeOf({bytes, static_cast<uint64_t>(root)})};
  detail::run(ctx, signature, [&] {
    Steps steps(ctx);
    steps.forEachWindow(bytes, [&](size_t base, size_t length) {
      if (me != root) {
        steps.write(in + base, length);
        return;
      }
      const uint32_t step = steps.begin();
      steps.publish(step);
      steps.waitAll(step);
      for (int r = 0; r < n; ++r) {
        if (r != root) std::memcpy(out + r * bytes + base, steps.of(r, step), length);
      }
    });
  });
}

// The root streams its whole input (n blocks) through its slot, a window per step; each rank
// copies the part of the window that lies in its block and skips the other steps' waits.
void scatter(const Context& ctx, const void* input, void* output, size_t bytes, int root) {
  const int n = ctx.size(), me = ctx.rank();
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  if (me == root && bytes > 0 && in + me * bytes != out) std::memmove(out, in + me * bytes, bytes);
  if (n == 1 || bytes == 0) return;
  const detail::Signature signature{opSignature(CollectiveKind::kScatter),
                                    detail::shapeOf({bytes, static_cast<uint64_t>(root)})};
  detail::run(ctx, signature, [&] {
    Steps steps(ctx);
    const size_t blockBegin = me * bytes, blockEnd = blockBegin + bytes;
    steps.forEachWindow(bytes * n, [&](size_t base, size_t length) {
      if (me == root) {
        steps.write(in + base, length);
        return;
      }
      const uint32_t step = steps.begin();
      steps.publish(step);
      const size_t lo = std::max(base, blockBegin), hi = std::min(base + length, blockEnd);
      if (lo >= hi) return;
      steps.waitFor(root, step);
      std::memcpy(out + (lo - blockBegin), steps.of(root, step) + (lo - base), hi - lo);
    });
  });
}

// Each slot is a 64-byte header plus n parts of B bytes; part d carries bytes [kB, (k+1)B) of
// the message to rank d at step k. No rank knows the others' message lengths, so the header
// says whether the writer has more after this step, and the ranks stop after the first step
// in which nobody had (all read the same headers, so all stop together).
void allToAll(const Context& ctx, const void* input, const std::vector<size_t>& sendOffsets,
              const std::vector<size_t>& sendLengths, void* output,
              const std::vector<size_t>& recvOffsets, const std::vector<size_t>& recvLengths) {
  const int n = ctx.size(), me = ctx.rank();
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  if (recvLengths[me] > 0) {
    std::memmove(out + recvOffsets[me], in + sendOffsets[me], recvLengths[me]);
  }
  if (n == 1) return;
  constexpr size_t kHeader = 64;
  // Every rank's lengths differ: only the kind can be compared.
  detail::run(ctx, {opSignature(CollectiveKind::kAllToAll), 0}, [&] {
    Steps steps(ctx);
    const size_t part = detail::elementsIn((steps.slotBytes() - kHeader) / n, 8) * 8;
    XCCL_CHECK(part > 0, "shared-memory slots of ", steps.slotBytes(), " bytes are too small for ",
               n, " ranks");
    for (size_t base = 0;; base += part) {
      const uint32_t step = steps.beginWriting();
      uint8_t* slot = steps.mine(step);
      uint32_t more = 0;
      for (int d = 0; d < n; ++d) {
        if (d == me) continue;
        const size_t length = clip(sendLengths[d], base, part);
        if (length > 0) std::memcpy(slot + kHeader + d * part, in + sendOffsets[d] + base, length);
        more |= sendLengths[d] > base + part;
      }
      std::memcpy(slot, &more, sizeof(more));
      steps.publish(step);
      steps.waitAll(step);
      uint32_t anyMore = 0;
      for (int r = 0; r < n; ++r) {
        uint32_t header;
        std::memcpy(&header, steps.of(r, step), sizeof(header));
        anyMore |= header;
        const size_t length = r == me ? 0 : clip(recvLengths[r], base, part);
        if (length > 0) {
          std::memcpy(out + recvOffsets[r] + base, steps.of(r, step) + kHeader + me * part, length);
        }
      }
      if (anyMore == 0) break;
    }
  });
}

void barrier(const Context& ctx) {
  if (ctx.size() == 1) return;
  detail::run(ctx, {opSignature(CollectiveKind::kBarrier), 0}, [&] {
    Steps steps(ctx);
    const uint32_t step = steps.begin();
    steps.publish(step);
    steps.waitAll(step);
  });
}

}  // namespace xccl::algo::shm
