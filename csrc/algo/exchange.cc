// The data-movement collectives: all_gather, all_to_all, gather, scatter, broadcast, barrier.
#include <algorithm>
#include <cstring>

#include "algo/collectives.h"
#include "algo/ring.h"

namespace xccl::algo {
namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

// Broadcast along a chain root -> root+1 -> ... in chunks: every link carries the message once
// and the chain fills after n-1 chunk times, so large messages approach link bandwidth.
void chainBroadcast(const Context& ctx, uint8_t* data, size_t bytes, int root) {
  const int n = ctx.size(), me = ctx.rank();
  const int position = mod(me - root, n);
  const int next = (position + 1 < n) ? mod(me + 1, n) : -1;
  const int prev = (position > 0) ? mod(me - 1, n) : -1;
  const size_t chunk = ctx.tunables.ringChunkBytes;
  const size_t chunks = (bytes + chunk - 1) / chunk;
  std::vector<net::RequestPtr> recvs, sends;
  if (prev >= 0) {
    for (size_t k = 0; k < chunks; ++k) {
      size_t off = k * chunk;
      recvs.push_back(
          ctx.irecv(prev, static_cast<uint32_t>(k), data + off, std::min(chunk, bytes - off)));
    }
  }
  for (size_t k = 0; k < chunks; ++k) {
    if (prev >= 0) ctx.wait({recvs[k]});
    size_t off = k * chunk;
    if (next >= 0)
      sends.push_back(
          ctx.isend(next, static_cast<uint32_t>(k), data + off, std::min(chunk, bytes - off)));
  }
  ctx.wait(sends);
}

// Binomial tree: ceil(log2 n) rounds, the latency algorithm for small messages.
void treeBroadcast(const Context& ctx, uint8_t* data, size_t bytes, int root) {
  const int n = ctx.size();
  const int position = mod(ctx.rank() - root, n);
  int mask = 1;
  while (mask < n) {
    if (position & mask) {
      ctx.wait({ctx.irecv(mod(position - mask + root, n), 0, data, bytes)});
      break;
    }
    mask <<= 1;
  }
  std::vector<net::RequestPtr> sends;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (position + mask < n)
      sends.push_back(ctx.isend(mod(position + mask + root, n), 0, data, bytes));
  }
  ctx.wait(sends);
}

}  // namespace

void allGather(const Context& caller, const void* input, void* output,
               const std::vector<size_t>& bytesPerRank) {
  const Context ctx = caller.as(opSignature(CollectiveKind::kAllGather));
  const int n = ctx.size(), me = ctx.rank();
  Segments segments = Segments::of(bytesPerRank);
  auto* out = static_cast<uint8_t*>(output);
  if (bytesPerRank[me] > 0 && out + segments.offset[me] != input) {
    std::memcpy(out + segments.offset[me], input, bytesPerRank[me]);
  }
  if (n == 1) return;
  if (ctx.algorithmFor(Collective::kAllGather, segments.maxLength()) == Algorithm::kRing) {
    runRing(ctx, out, segments, ringGatherSteps(me, n, 0), DataType::kUInt8, ReduceOp::kSum);
    return;
  }
  std::vector<net::RequestPtr> requests;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    requests.push_back(ctx.irecv(peer, 0, out + segments.offset[peer], segments.length[peer]));
    requests.push_back(ctx.isend(peer, 0, out + segments.offset[me], segments.length[me]));
  }
  ctx.wait(requests);
}

void allToAll(const Context& caller, const void* input, const std::vector<size_t>& sendOffsets,
              const std::vector<size_t>& sendLengths, void* output,
              const std::vector<size_t>& recvOffsets, const std::vector<size_t>& recvLengths) {
  const Context ctx = caller.as(opSignature(CollectiveKind::kAllToAll));
  const int n = ctx.size(), me = ctx.rank();
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  std::vector<net::RequestPtr> requests;
  // Receives first, then sends starting at the right neighbour, so the ranks do not all target
  // rank 0 first.
  for (int i = 1; i < n; ++i) {
    int peer = mod(me - i, n);
    requests.push_back(ctx.irecv(peer, 0, out + recvOffsets[peer], recvLengths[peer]));
  }
  for (int i = 1; i < n; ++i) {
    int peer = mod(me + i, n);
    requests.push_back(ctx.isend(peer, 0, in + sendOffsets[peer], sendLengths[peer]));
  }
  if (recvLengths[me] > 0)
    std::memmove(out + recvOffsets[me], in + sendOffsets[me], recvLengths[me]);
  ctx.wait(requests);
}

void gather(const Context& caller, const void* input, size_t bytes, void* output, int root) {
  const Context ctx = caller.as(opSignature(CollectiveKind::kGather));
  const int n = ctx.size(), me = ctx.rank();
  std::vector<net::RequestPtr> requests;
  if (me == root) {
    auto* out = static_cast<uint8_t*>(output);
    for (int peer = 0; peer < n; ++peer) {
      if (peer != me) requests.push_back(ctx.irecv(peer, 0, out + peer * bytes, bytes));
    }
    if (bytes > 0 && out + me * bytes != input) std::memcpy(out + me * bytes, input, bytes);
  } else {
    requests.push_back(ctx.isend(root, 0, input, bytes));
  }
  ctx.wait(requests);
}

void scatter(const Context& caller, const void* input, void* output, size_t bytes, int root) {
  const Context ctx = caller.as(opSignature(CollectiveKind::kScatter));
  const int n = ctx.size(), me = ctx.rank();
  std::vector<net::RequestPtr> requests;
  if (me == root) {
    const auto* in = static_cast<const uint8_t*>(input);
    for (int peer = 0; peer < n; ++peer) {
      if (peer != me) requests.push_back(ctx.isend(peer, 0, in + peer * bytes, bytes));
    }
    if (bytes > 0 && in + me * bytes != output) std::memcpy(output, in + me * bytes, bytes);
  } else {
    requests.push_back(ctx.irecv(root, 0, output, bytes));
  }
  ctx.wait(requests);
}

void broadcast(const Context& caller, void* data, size_t bytes, int root) {
  const Context ctx = caller.as(opSignature(CollectiveKind::kBroadcast));
  if (ctx.size() == 1) return;
  auto* p = static_cast<uint8_t*>(data);
  if (ctx.algorithmFor(Collective::kBroadcast, bytes) == Algorithm::kRing) {
    chainBroadcast(ctx, p, bytes, root);
  } else {
    treeBroadcast(ctx, p, bytes, root);
  }
}

void barrier(const Context& caller) {
  const Context ctx = caller.as(opSignature(CollectiveKind::kBarrier));
  const int n = ctx.size(), me = ctx.rank();
  uint32_t round = 0;
  for (int distance = 1; distance < n; distance <<= 1, ++round) {
    ctx.wait({ctx.irecv(mod(me - distance, n), round, nullptr, 0),
              ctx.isend(mod(me + distance, n), round, nullptr, 0)});
  }
}

}  // namespace xccl::algo
