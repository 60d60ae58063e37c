// The rooted hierarchical collectives: broadcast and reduce as a pipelined chain through one
// agent per host (the root's host at its head, resp. its tail), gather and scatter as one
// exchange between the root and each other host's leader. Overview: hierarchical.h.
#include <cstring>

#include "algo/hierarchical.h"
#include "algo/hierarchical_view.h"
#include "algo/reduce.h"
#include "algo/scratch.h"

namespace xccl::algo::hier {
namespace {

using detail::forEachChunk;
using detail::Pieces;
using detail::View;

// What gather and scatter share: this host's agent and ranks, and the root's walk over the
// chunks of every rank on other hosts.
struct Exchange {
  Exchange(const Runner& runner, const CpuPlan& plan, CollectiveKind kind, size_t bytes, int root)
      : v(runner, plan, opSignature(kind)),
        bytes(bytes),
        root(root),
        host(v.host()),
        me(v.agent(host, root)),
        localRoot(v.localIndex(me)),
        mine(v.ranksOn(host)),
        k(mine.size()),
        pieces(std::vector<size_t>(v.size(), bytes), v.chunk) {}

  // At the root: f(that rank's leader, message step, offset in an n-block buffer, length) for
  // each chunk of each rank on another host.
  template <typename F>
  void forEachRemoteChunk(F f) const {
    for (int r = 0; r < v.size(); ++r) {
      if (v.hostOf(r) == host) continue;
      forEachChunk(bytes, v.chunk, [&](uint32_t c, size_t off, size_t len) {
        f(v.leader(v.hostOf(r)), pieces.step(r, c), r * bytes + off, len);
      });
    }
  }

  // The agent's staging of this host's chunks: one chunk at a time at the root (its copies are
  // done when the chunk's step ends), the whole message at another host's leader (its network
  // requests of every chunk are in flight at once).
  size_t scratchBytes() const {
    return v.rank() != me ? 0 : k * (me == root ? std::min(v.chunk, bytes) : bytes);
  }
  // Where chunk `off` of this host's ranks starts in that staging (null for the others).
  uint8_t* block(std::vector<uint8_t>& scratch, size_t off) const {
    return scratch.empty() ? nullptr : scratch.data() + (me == root ? 0 : k * off);
  }

  const View v;
  const size_t bytes;
  const int root;
  const int host, me, localRoot;  // me: this host's agent; localRoot: its local rank
  const std::vector<int>& mine;   // this host's ranks
  const size_t k;
  const Pieces pieces;
};

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
  ScratchBytes partial(prev >= 0 ? count * es : 0);
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
  const Exchange x(runner, plan, CollectiveKind::kGather, bytes, root);
  const View& v = x.v;
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  std::vector<net::RequestPtr> requests;
  if (v.rank() == root) {
    x.forEachRemoteChunk([&](int from, uint32_t step, size_t at, size_t len) {
      requests.push_back(v.net.irecv(from, step, out + at, len));
    });
  }
  // Chunk c of this host's inputs, local rank i's at block + i * len (Exchange::block).
  std::vector<uint8_t> scratch(v.local ? x.scratchBytes() : 0);
  forEachChunk(bytes, v.chunk, [&](uint32_t c, size_t off, size_t len) {
    uint8_t* block = x.block(scratch, off);
    if (v.local) shm::gather(*v.local, in + off, len, block, x.localRoot);
    if (v.rank() != x.me) return;
    for (size_t i = 0; i < x.k; ++i) {
      const uint8_t* piece = v.local ? block + i * len : in + off;
      if (v.rank() == root) {
        std::memcpy(out + x.mine[i] * bytes + off, piece, len);
      } else {
        requests.push_back(v.net.isend(root, x.pieces.step(x.mine[i], c), piece, len));
      }
    }
  });
  v.net.wait(requests);
}

// The reverse of gather: the root sends each rank's block, in chunks, to that rank's leader,
// which scatters chunk c over shared memory while chunk c+1 arrives.
void scatter(const Runner& runner, const CpuPlan& plan, const void* input, void* output,
             size_t bytes, int root) {
  const Exchange x(runner, plan, CollectiveKind::kScatter, bytes, root);
  const View& v = x.v;
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  std::vector<net::RequestPtr> requests;
  // Chunk c of this host's blocks, local rank i's at k * off + i * len (Exchange::block): at the
  // root packed per chunk, at a receiving leader where the network puts them.
  std::vector<uint8_t> scratch(x.scratchBytes());
  if (v.rank() == root) {
    x.forEachRemoteChunk([&](int to, uint32_t step, size_t at, size_t len) {
      requests.push_back(v.net.isend(to, step, in + at, len));
    });
  } else if (v.rank() == x.me) {
    forEachChunk(bytes, v.chunk, [&](uint32_t c, size_t off, size_t len) {
      for (size_t i = 0; i < x.k; ++i) {
        requests.push_back(v.net.irecv(root, x.pieces.step(x.mine[i], c),
                                       scratch.data() + x.k * off + i * len, len));
      }
    });
  }
  forEachChunk(bytes, v.chunk, [&](uint32_t c, size_t off, size_t len) {
    uint8_t* block = x.block(scratch, off);
    if (v.rank() == root) {
      for (size_t i = 0; i < x.k; ++i) {
        std::memcpy(block + i * len, in + x.mine[i] * bytes + off, len);
      }
    } else if (v.rank() == x.me) {
      for (size_t i = 0; i < x.k; ++i) v.waitOne(requests[c * x.k + i]);
    }
    if (v.local) {
      shm::scatter(*v.local, block, out + off, len, x.localRoot);
    } else if (v.rank() == x.me) {
      std::memcpy(out + off, block, len);
    }
  });
  v.net.wait(requests);
}

}  // namespace xccl::algo::hier
