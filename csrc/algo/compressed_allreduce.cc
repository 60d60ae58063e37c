#include "algo/compressed_allreduce.h"

#include <optional>
#include <vector>

#include "algo/compressed_codec.h"
#include "algo/reduce.h"
#include "algo/ring.h"
#include "algo/shm_steps.h"
#include "common/error.h"

namespace xccl::algo {
namespace {

using compressed::BFloat16Wire;
using compressed::Float16Wire;

// Folded into the shared-memory signature's shape, so a rank running a compressed all_reduce
// where a peer runs a plain one with the same wire dtype is told, not mis-combined.
constexpr uint64_t kCompressedShape = 0xc0b9e55ed;

// The one runtime-to-template dispatch: calls f(S{}, W{}) for the buffer type and wire type.
template <typename F>
void dispatch(DataType type, DataType wire, F f) {
  XCCL_CHECK_ARG(type == DataType::kFloat32 || type == DataType::kFloat64,
                 "compressed all_reduce: the buffer must be float32 or float64, not ",
                 dataTypeName(type));
  XCCL_CHECK_ARG(wire == DataType::kBFloat16 || wire == DataType::kFloat16,
                 "compressed all_reduce: the wire type must be bfloat16 or float16, not ",
                 dataTypeName(wire));
  auto withWire = [&](auto s) {
    if (wire == DataType::kBFloat16) return f(s, BFloat16Wire{});
    f(s, Float16Wire{});
  };
  if (type == DataType::kFloat32) return withWire(float{});
  withWire(double{});
}

// Where no other rank contributes, only the division is left.
void divideAlone(void* data, size_t count, DataType type, int64_t divisor) {
  if (divisor != 1) divide(type, data, count, divisor);
}

const uint16_t* wireOf(const uint8_t* slot) { return reinterpret_cast<const uint16_t*>(slot); }
uint16_t* wireOf(uint8_t* slot) { return reinterpret_cast<uint16_t*>(slot); }

// The plan's one-shot or two-shot (plannedAlgorithm where none, as shm::allReduce).
bool usesTwoShot(const shm::Context& ctx, size_t wireBytes) {
  return plannedAlgorithm(ctx.algorithm, CpuRoute::kShm, Collective::kAllReduce, wireBytes,
                          ctx.size(), ctx.tunables) == Algorithm::kTwoShot;
}

}  // namespace

// shm all_reduce's chunk loop (shm_collectives.cc) with the conversions fused into its copies:
// a rank narrows its chunk straight into its slot, and the reduction reads the wire slots and
// writes the average back into the caller's buffer (one-shot), or into the rank's other slot as
// wire values that every rank then widens into its buffer (two-shot).
void compressedAllReduce(const shm::Context& ctx, void* data, size_t count, DataType type,
                         DataType wire, int64_t divisor) {
  dispatch(type, wire, [](auto, auto) {});  // refuse bad types before any step
  if (count == 0) return;
  if (ctx.size() == 1) return divideAlone(data, count, type, divisor);
  const bool twoShot = usesTwoShot(ctx, count * sizeof(uint16_t));
  const shm::detail::Signature signature{
      opSignature(CollectiveKind::kAllReduce, wire, ReduceOp::kAvg),
      shm::detail::shapeOf({count, twoShot, static_cast<uint64_t>(type), kCompressedShape})};
  shm::detail::run(ctx, signature, [&] {
    dispatch(type, wire, [&](auto s, auto w) {
      using S = decltype(s);
      using W = decltype(w);
      shm::detail::Steps steps(ctx);
      const int n = ctx.size(), me = ctx.rank();
      const size_t perChunk = steps.slotBytes() / sizeof(uint16_t);
      std::vector<const uint16_t*> srcs(n);
      for (size_t base = 0; base < count; base += perChunk) {
        const size_t len = std::min(perChunk, count - base);
        S* chunk = static_cast<S*>(data) + base;
        const uint32_t in = steps.beginWriting();
        compressed::narrow<W>(chunk, wireOf(steps.mine(in)), len);
        steps.publish(in);
        steps.waitAll(in);
        for (int r = 0; r < n; ++r) srcs[r] = wireOf(steps.of(r, in));
        if (!twoShot) {
          compressed::averageInto<W>(srcs.data(), n, len, divisor, chunk);
          continue;
        }
        const shm::detail::Slice mine = shm::detail::sliceOf(len, sizeof(uint16_t), n, me);
        const uint32_t out = steps.beginWriting();
        for (int r = 0; r < n; ++r) srcs[r] += mine.offset;
        compressed::averageIntoWire<W>(srcs.data(), n, mine.length, divisor,
                                       wireOf(steps.mine(out)));
        steps.publish(out);
        steps.waitAll(out);
        for (int r = 0; r < n; ++r) {
          const shm::detail::Slice slice = shm::detail::sliceOf(len, sizeof(uint16_t), n, r);
          compressed::widen<W>(wireOf(steps.of(r, out)), chunk + slice.offset, slice.length);
        }
      }
    });
  });
}

// The buffer is compacted to wire values in place; rank p owns segment p. Every rank sends
// segment p to rank p in chunks of ringChunkBytes (all posted at once) and sums its own segment
// chunk by chunk as the peers' chunks arrive (two chunk buffers per peer, so chunk k + 1 lands
// while chunk k is summed), rounding the average into its segment. All-gather of the segments,
// then the wire values are widened back in place. Bytes per rank on the wire: 2(n-1)/n of the
// wire buffer, like a ring, with a single rounding of the fp32 sum.
void compressedAllReduce(const Context& caller, void* data, size_t count, DataType type,
                         DataType wire, int64_t divisor) {
  dispatch(type, wire, [](auto, auto) {});
  if (count == 0) return;
  const int n = caller.size(), me = caller.rank();
  if (n == 1) return divideAlone(data, count, type, divisor);
  const Context ctx = caller.as(opSignature(CollectiveKind::kAllReduce, wire, ReduceOp::kAvg));
  dispatch(type, wire, [&](auto s, auto w) {
    using S = decltype(s);
    using W = decltype(w);
    compressed::compact<W, S>(data, count);
    auto* buffer = static_cast<uint16_t*>(data);
    const Segments segments = Segments::even(count, 1, n);  // in wire elements
    // At most a segment: a small bucket allocates what it receives, not ringChunkBytes per peer.
    const size_t chunk =
        std::max<size_t>(1, std::min(ctx.tunables.ringChunkBytes / sizeof(uint16_t),
                                     segments.maxLength()));
    const auto chunksOf = [&](int p) { return (segments.length[p] + chunk - 1) / chunk; };
    const auto lengthOf = [&](int p, size_t k) {
      return std::min(chunk, segments.length[p] - k * chunk);
    };
    std::vector<net::RequestPtr> sends;
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      for (size_t k = 0; k < chunksOf(p); ++k) {
        sends.push_back(ctx.isend(p, static_cast<uint32_t>(k),
                                  buffer + segments.offset[p] + k * chunk,
                                  lengthOf(p, k) * sizeof(uint16_t)));
      }
    }
    // scratch[parity][peer]: chunk k of each peer's contribution to this rank's segment.
    std::vector<uint16_t> scratch(2 * n * chunk);
    const auto slotOf = [&](size_t k, int p) { return scratch.data() + ((k % 2) * n + p) * chunk; };
    const size_t chunks = chunksOf(me);
    std::vector<std::vector<net::RequestPtr>> recvs(chunks);
    const auto post = [&](size_t k) {
      for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        recvs[k].push_back(ctx.irecv(p, static_cast<uint32_t>(k), slotOf(k, p),
                                     lengthOf(me, k) * sizeof(uint16_t)));
      }
    };
    std::vector<const uint16_t*> srcs(n);
    if (chunks > 0) post(0);
    for (size_t k = 0; k < chunks; ++k) {
      if (k + 1 < chunks) post(k + 1);
      ctx.wait(recvs[k]);
      uint16_t* own = buffer + segments.offset[me] + k * chunk;
      for (int p = 0; p < n; ++p) srcs[p] = p == me ? own : slotOf(k, p);
      compressed::averageIntoWire<W>(srcs.data(), n, lengthOf(me, k), divisor, own);
    }
    // The all-gather overwrites the segments those sends read.
    ctx.wait(sends);
    std::vector<size_t> bytes(segments.length);
    for (size_t& b : bytes) b *= sizeof(uint16_t);
    Context gather = caller;
    gather.algorithm = Algorithm::kAuto;  // planned as an all_gather, alike on every rank
    allGather(gather, buffer + segments.offset[me], buffer, bytes);
    compressed::expand<W, S>(data, count);
  });
}

void compressedAllReduce(const Runner& runner, void* data, size_t count, DataType type,
                         DataType wire, Compression where) {
  dispatch(type, wire, [](auto, auto) {});
  const int n = runner.size();
  const CpuPlan plan = runner.plan(Collective::kAllReduce, count * elementSize(type));
  if (plan.route == CpuRoute::kShm) {
    if (where == Compression::kBetweenHosts)
      return allReduce(runner, data, count, type, ReduceOp::kAvg);
    return compressedAllReduce(runner.shmContext(plan), data, count, type, wire, n);
  }
  if (plan.route == CpuRoute::kNet) {
    return compressedAllReduce(runner.netContext(plan), data, count, type, wire, n);
  }
  // Per host: the exact sum to the host's leader, the compressed average among the leaders,
  // the leader's result to the host (as the hierarchical all_reduce of algo/hierarchical.h, with
  // the middle phase compressed).
  if (where == Compression::kEverywhere && n > 1) {
    dispatch(type, wire, [&](auto s, auto w) {
      compressed::roundToWire<decltype(w)>(static_cast<decltype(s)*>(data), count);
    });
  }
  const net::Hierarchy& h = *runner.hierarchy;
  const std::optional<shm::Context> local = runner.hostContext(plan);
  if (local) shm::reduce(*local, data, count, type, ReduceOp::kSum, 0);
  if (h.leaders() != nullptr) {
    compressedAllReduce(runner.leadersContext(plan), data, count, type, wire, n);
  }
  if (local) shm::broadcast(*local, data, count * elementSize(type), 0);
}

}  // namespace xccl::algo
