// The rooted hierarchical collectives: broadcast and reduce as a pipelined chain through one
// agent per host (the root's host at its head, resp. its tail), gather and scatter as one
// exchange between the root and each other host's leader. Overview: hierarchical.h.
#include <cstring>

#include "algo/hierarchical.h"
#include "algo/hierarchical_view.h"
#include "algo/reduce.h"

namespace xccl::algo::hier {
namespace {

using detail::forEachChunk;
using detail::Pieces;
using detail::View;

}  // namespace

// Hosts form a chain from the root's host in host order. Each agent forwards chunk c to the next
// host as soon as it has it, then broadcasts it inside its host while chunk c+1 arrives.
void broadcast(const Runner& runner, const CpuPlan& plan, void* data, size_t bytes, int root) {
  const View v(runner, plan, opSignature(CollectiveKind::kBroadcast));
  auto* out = static_cast<uint8_t*>(data);
  const int hosts = v.hosts(), rootHost = v.hostOf(root);
  const int me = v.agent(v.host(), root), localRoot = v.localIndex(me);
  const auto inHost = [&](size_t offset, size_t length) {
    if (v.local) shm::broadcast(*v.local, out + offset, length, localRoot);
  };
  if (v.rank() != me) {
    forEachChunk(bytes, v.chunk, [&](uint32_t, size_t off, size_t len) { inHost(off, len); });
    return;
  }
  const int position = (v.host() - rootHost + hosts) % hosts;
  const int prev = position > 0 ? v.agent(v.hostAfter(v.host(), -1), root) : -1;
  const int next = position + 1 < hosts ? v.agent(v.hostAfter(v.host(), 1), root) : -1;
  std::vector<net::RequestPtr> recvs, sends;
  if (prev >= 0) {
    forEachChunk(bytes, v.chunk, [&](uint32_t c, size_t off, size_t len) {
      recvs.push_back(v.net.irecv(prev, c, out + off, len));
    });
  }
  forEachChunk(bytes, v.chunk, [&](uint32_t c, size_t off, size_t len) {
    if (prev >= 0) v.waitOne(recvs[c]);
    if (next >= 0) sends.push_back(v.net.isend(next, c, out + off, len));
    inHost(off, len);
  });
  v.net.wait(sends);
}

// The chain runs the other way and ends at the root's host: each agent reduces chunk c inside
// its host, adds the partial sum of the hosts before it and forwards the result, while the hosts
// before it already work on chunk c+1. AVG sums and the root divides once.
void reduce(const Runner& runner, const CpuPlan& plan, void* data, size_t count, DataType type,
            ReduceOp op, int root) {
  const View v(runner, plan, opSignature(CollectiveKind::kReduce, type, op));
  const ReduceOp combiner = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const size_t es = elementSize(type), chunk = std::max<size_t>(1, v.chunk / es);
  auto* out = static_cast<uint8_t*>(data);
  const int hosts = v.hosts(), rootHost = v.hostOf(root);
  const int me = v.agent(v.host(), root), localRoot = v.localIndex(me);
  const auto inHost = [&](size_t offset, size_t length) {
    if (v.local) shm::reduce(*v.local, out + offset * es, length, type, combiner, localRoot);
  };
  if (v.rank() != me) {
    forEachChunk(count, chunk, [&](uint32_t, size_t off, size_t len) { inHost(off, len); });
    return;
  }
  const int position = (v.host() - rootHost - 1 + 2 * hosts) % hosts;  // the root's host: last
  const int prev = position > 0 ? v.agent(v.hostAfter(v.host(), -1), root) : -1;
  const int next = position + 1 < hosts ? v.agent(v.hostAfter(v.host(), 1), root) : -1;
  std::vector<uint8_t> partial(prev >= 0 ? count * es : 0);
  std::vector<net::RequestPtr> recvs, sends;
  if (prev >= 0) {
    forEachChunk(count, chunk, [&](uint32_t c, size_t off, size_t len) {
      recvs.push_back(v.net.irecv(prev, c, partial.data() + off * es, len * es));
    });
  }
  forEachChunk(count, chunk, [&](uint32_t c, size_t off, size_t len) {
    inHost(off, len);
    if (prev >= 0) {
      v.waitOne(recvs[c]);
      reduceInto(type, combiner, out + off * es, partial.data() + off * es, len);
    }
    // A non-root agent's `data` is scratch (collective_signatures.h lets reduce clobber it).
    if (next >= 0) sends.push_back(v.net.isend(next, c, out + off * es, len * es));
  });
  v.net.wait(sends);
  if (op == ReduceOp::kAvg && v.rank() == root) divide(type, out, count, v.size());
}

// Each other host's leader gathers chunk c of its ranks' inputs over shared memory and sends each
// rank's piece to the root, which receives it in place in `output` while gathering its own host.
void gather(const Runner& runner, const CpuPlan& plan, const void* input, size_t bytes,
            void* output, int root) {
  const View v(runner, plan, opSignature(CollectiveKind::kGather));
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  const int n = v.size(), host = v.host();
  const int me = v.agent(host, root), localRoot = v.localIndex(me);
  const std::vector<int>& mine = v.ranksOn(host);
  const size_t k = mine.size();
  const Pieces pieces(std::vector<size_t>(n, bytes), v.chunk);
  std::vector<net::RequestPtr> requests;
  if (v.rank() == root) {
    for (int r = 0; r < n; ++r) {
      if (v.hostOf(r) == host) continue;
      forEachChunk(bytes, v.chunk, [&](uint32_t c, size_t off, size_t len) {
        requests.push_back(
            v.net.irecv(v.leader(v.hostOf(r)), pieces.step(r, c), out + r * bytes + off, len));
      });
    }
  }
  // Chunk c of this host's inputs, local rank i's at block + i * len: in `output` at the root
  // (scratch reused per chunk), in a whole-message scratch at a sending leader (sends in flight).
  std::vector<uint8_t> scratch(v.local && v.rank() == me ? k * (root == me ? v.chunk : bytes) : 0);
  forEachChunk(bytes, v.chunk, [&](uint32_t c, size_t off, size_t len) {
    uint8_t* block = scratch.empty() ? nullptr : scratch.data() + (root == me ? 0 : k * off);
    if (v.local) shm::gather(*v.local, in + off, len, block, localRoot);
    if (v.rank() != me) return;
    for (size_t i = 0; i < k; ++i) {
      const uint8_t* piece = v.local ? block + i * len : in + off;
      if (v.rank() == root) {
        std::memcpy(out + mine[i] * bytes + off, piece, len);
      } else {
        requests.push_back(v.net.isend(root, pieces.step(mine[i], c), piece, len));
      }
    }
  });
  v.net.wait(requests);
}

// The reverse of gather: the root sends each rank's block, in chunks, to that rank's leader,
// which scatters chunk c over shared memory while chunk c+1 arrives.
void scatter(const Runner& runner, const CpuPlan& plan, const void* input, void* output,
             size_t bytes, int root) {
  const View v(runner, plan, opSignature(CollectiveKind::kScatter));
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  const int n = v.size(), host = v.host();
  const int me = v.agent(host, root), localRoot = v.localIndex(me);
  const std::vector<int>& mine = v.ranksOn(host);
  const size_t k = mine.size();
  const Pieces pieces(std::vector<size_t>(n, bytes), v.chunk);
  std::vector<net::RequestPtr> requests;
  // Chunk c of this host's blocks, local rank i's at k * off + i * len: at the root packed per
  // chunk (scratch reused), at a receiving leader where the network puts them.
  std::vector<uint8_t> scratch(v.rank() == me ? k * (root == me ? v.chunk : bytes) : 0);
  if (v.rank() == root) {
    for (int r = 0; r < n; ++r) {
      if (v.hostOf(r) == host) continue;
      forEachChunk(bytes, v.chunk, [&](uint32_t c, size_t off, size_t len) {
        requests.push_back(
            v.net.isend(v.leader(v.hostOf(r)), pieces.step(r, c), in + r * bytes + off, len));
      });
    }
  } else if (v.rank() == me) {
    forEachChunk(bytes, v.chunk, [&](uint32_t c, size_t off, size_t len) {
      for (size_t i = 0; i < k; ++i) {
        requests.push_back(
            v.net.irecv(root, pieces.step(mine[i], c), scratch.data() + k * off + i * len, len));
      }
    });
  }
  forEachChunk(bytes, v.chunk, [&](uint32_t c, size_t off, size_t len) {
    uint8_t* block = scratch.empty() ? nullptr : scratch.data() + (root == me ? 0 : k * off);
    if (v.rank() == root) {
      for (size_t i = 0; i < k; ++i) std::memcpy(block + i * len, in + mine[i] * bytes + off, len);
    } else if (v.rank() == me) {
      for (size_t i = 0; i < k; ++i) v.waitOne(requests[c * k + i]);
    }
    if (v.local) {
      shm::scatter(*v.local, block, out + off, len, localRoot);
    } else if (v.rank() == me) {
      std::memcpy(out + off, block, len);
    }
  });
  v.net.wait(requests);
}

}  // namespace xccl::algo::hier
