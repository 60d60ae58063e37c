// The hierarchical collectives in which every rank gives and gets: all_reduce, all_gather,
// reduce_scatter, all_to_all and barrier. Overview: hierarchical.h.
#include <cstring>
#include <numeric>

#include "algo/hierarchical.h"
#include "algo/hierarchical_view.h"
#include "algo/reduce.h"

namespace xccl::algo::hier {
namespace {

using detail::forEachChunk;
using detail::Pieces;
using detail::View;

// A stretch of `output` that the leader broadcasts inside its host once the network requests
// before index `requestsEnd` completed: adjacent parts merged up to a chunk, so many small parts
// cost one in-host step.
struct Window {
  size_t offset;
  size_t length;
  size_t requestsEnd;
};

}  // namespace

// Reduce to each host's leader over its segment, all_reduce among the leaders over the network
// (AVG as a sum, divided there by the group size), broadcast from the leader over the segment.
// Every rank gets the leaders' bytes, which are identical (the TCP algorithms combine in rank
// order).
void allReduce(const Runner& runner, const CpuPlan& plan, void* data, size_t count, DataType type,
               ReduceOp op) {
  const net::Hierarchy& h = *runner.hierarchy;
  const ReduceOp combiner = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const std::optional<shm::Context> local = runner.hostContext(plan);
  if (local) shm::reduce(*local, data, count, type, combiner, 0);
  if (h.leaders() != nullptr) {
    const Context& tcp = runner.tcp;
    algo::allReduce(Context{*h.leaders(), tcp.seq, tcp.what, tcp.deadline, tcp.tunables,
                            plan.algorithm},
                    data, count, type, combiner);
    if (op == ReduceOp::kAvg) divide(type, data, count, runner.size());
  }
  if (local) shm::broadcast(*local, data, count * elementSize(type), 0);
}

// 1. An in-host all_gather puts the host's parts in place (straight into `output` where the
// host's ranks are consecutive). 2. The leader sends them, chunk by chunk, to every other leader
// and 3. broadcasts the other hosts' parts inside its host as their chunks arrive.
void allGather(const Runner& runner, const CpuPlan& plan, const void* input, void* output,
               const std::vector<size_t>& bytesPerRank) {
  const View v(runner, plan, opSignature(CollectiveKind::kAllGather));
  auto* out = static_cast<uint8_t*>(output);
  const int n = v.size(), host = v.host();
  const std::vector<int>& mine = v.ranksOn(host);
  const bool leads = v.rank() == mine.front();
  std::vector<size_t> offset(n + 1, 0);
  std::partial_sum(bytesPerRank.begin(), bytesPerRank.end(), offset.begin() + 1);
  const Pieces pieces(bytesPerRank, v.chunk);

  std::vector<net::RequestPtr> recvs, sends;
  std::vector<Window> windows;
  size_t index = 0;
  for (int r = 0; r < n; ++r) {
    if (v.hostOf(r) == host) continue;
    forEachChunk(bytesPerRank[r], v.chunk, [&](uint32_t c, size_t off, size_t len) {
      if (leads)
        recvs.push_back(
            v.net.irecv(v.leader(v.hostOf(r)), pieces.step(r, c), out + offset[r] + off, len));
      const size_t at = offset[r] + off;
      ++index;
      if (!windows.empty() && windows.back().offset + windows.back().length == at &&
          windows.back().length + len <= v.chunk) {
        windows.back().length += len;
        windows.back().requestsEnd = index;
      } else {
        windows.push_back({at, len, index});
      }
    });
  }

  if (v.local) {
    std::vector<size_t> lengths;
    for (int r : mine) lengths.push_back(bytesPerRank[r]);
    if (mine.back() - mine.front() + 1 == static_cast<int>(mine.size())) {
      shm::allGather(*v.local, input, out + offset[mine.front()], lengths);
    } else {
      std::vector<uint8_t> parts(std::accumulate(lengths.begin(), lengths.end(), size_t{0}));
      shm::allGather(*v.local, input, parts.data(), lengths);
      size_t at = 0;
      for (int r : mine) {
        std::memcpy(out + offset[r], parts.data() + at, bytesPerRank[r]);
        at += bytesPerRank[r];
      }
    }
  } else if (bytesPerRank[v.rank()] > 0 && out + offset[v.rank()] != input) {
    std::memmove(out + offset[v.rank()], input, bytesPerRank[v.rank()]);
  }

  if (leads) {
    for (int d = 1; d < v.hosts(); ++d) {
      const int to = v.leader(v.hostAfter(host, d));
      for (int r : mine) {
        forEachChunk(bytesPerRank[r], v.chunk, [&](uint32_t c, size_t off, size_t len) {
          sends.push_back(v.net.isend(to, pieces.step(r, c), out + offset[r] + off, len));
        });
      }
    }
  }
  size_t done = 0;
  for (const Window& w : windows) {
    for (; leads && done < w.requestsEnd; ++done) v.waitOne(recvs[done]);
    if (v.local) shm::broadcast(*v.local, out + w.offset, w.length, 0);
  }
  v.net.wait(sends);
}

// Each host reduces, chunk by chunk, the blocks of every other host's ranks (packed per host)
// to its leader, which sends that host's leader the partial sums; last it reduces its own
// ranks' blocks, adds the other hosts' partials and scatters the result inside the host.
void reduceScatter(const Runner& runner, const CpuPlan& plan, const void* input, void* output,
                   size_t count, DataType type, ReduceOp op) {
  const View v(runner, plan, opSignature(CollectiveKind::kReduceScatter, type, op));
  const ReduceOp combiner = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const size_t es = elementSize(type), chunk = std::max<size_t>(1, v.chunk / es);
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  const int hosts = v.hosts(), host = v.host();
  const size_t k = v.ranksOn(host).size(), chunks = detail::chunksOf(count, chunk);
  const bool leads = v.rank() == v.leader(host);

  // The leader's packed blocks stay until sent: host g's at base[g], chunk-major (chunk c of
  // local rank i at base + kg * off + i * len); the others pack into one reused chunk.
  std::vector<size_t> base(hosts + 1, 0);
  size_t widest = 0;
  for (int g = 0; g < hosts; ++g) {
    base[g + 1] = base[g] + v.ranksOn(g).size() * count;
    widest = std::max(widest, v.ranksOn(g).size());
  }
  std::vector<uint8_t> packed((leads ? base[hosts] : widest * std::min(chunk, count)) * es);
  std::vector<uint8_t> partials(leads ? (hosts - 1) * k * count * es : 0);
  std::vector<net::RequestPtr> recvs, sends;
  for (int d = 1; leads && d < hosts; ++d) {
    forEachChunk(count, chunk, [&](uint32_t c, size_t off, size_t len) {
      uint8_t* at = partials.data() + ((d - 1) * k * count + k * off) * es;
      recvs.push_back(v.net.irecv(v.leader(v.hostAfter(host, -d)), c, at, k * len * es));
    });
  }
  // The other hosts first (each host starts with the next one, spreading the traffic), own last.
  for (int d = 1; d <= hosts; ++d) {
    const int g = v.hostAfter(host, d);
    const std::vector<int>& ranks = v.ranksOn(g);
    const size_t kg = ranks.size();
    forEachChunk(count, chunk, [&](uint32_t c, size_t off, size_t len) {
      uint8_t* block = packed.data() + (leads ? (base[g] + kg * off) * es : 0);
      for (size_t i = 0; i < kg; ++i) {
        std::memcpy(block + i * len * es, in + (ranks[i] * count + off) * es, len * es);
      }
      if (v.local) shm::reduce(*v.local, block, kg * len, type, combiner, 0);
      if (leads && g != host) sends.push_back(v.net.isend(v.leader(g), c, block, kg * len * es));
      if (g != host) return;
      for (int e = 1; leads && e < hosts; ++e) {
        v.waitOne(recvs[(e - 1) * chunks + c]);
        const uint8_t* theirs = partials.data() + ((e - 1) * k * count + k * off) * es;
        reduceInto(type, combiner, block, theirs, k * len);
      }
      if (v.local) {
        shm::scatter(*v.local, leads ? block : nullptr, out + off * es, len * es, 0);
      } else {
        std::memcpy(out + off * es, block, len * es);
      }
    });
  }
  v.net.wait(sends);
  if (op == ReduceOp::kAvg) divide(type, out, count, v.size());
}

// Peers on this host exchange over shared memory while the messages to and from other hosts'
// ranks travel directly between the two ranks (posted first, so both run at once). Messages are
// not combined per host: that would save small-message latency but needs every rank's lengths.
void allToAll(const Runner& runner, const CpuPlan& plan, const void* input,
              const std::vector<size_t>& sendOffsets, const std::vector<size_t>& sendLengths,
              void* output, const std::vector<size_t>& recvOffsets,
              const std::vector<size_t>& recvLengths) {
  const View v(runner, plan, opSignature(CollectiveKind::kAllToAll));
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  const int host = v.host();
  std::vector<net::RequestPtr> requests;
  for (int r = 0; r < v.size(); ++r) {
    if (v.hostOf(r) == host) continue;
    if (recvLengths[r] > 0) {
      requests.push_back(v.net.irecv(r, 0, out + recvOffsets[r], recvLengths[r]));
    }
    if (sendLengths[r] > 0) {
      requests.push_back(v.net.isend(r, 0, in + sendOffsets[r], sendLengths[r]));
    }
  }
  if (v.local) {
    std::vector<size_t> so, sl, ro, rl;
    for (int r : v.ranksOn(host)) {
      so.push_back(sendOffsets[r]);
      sl.push_back(sendLengths[r]);
      ro.push_back(recvOffsets[r]);
      rl.push_back(recvLengths[r]);
    }
    shm::allToAll(*v.local, input, so, sl, output, ro, rl);
  } else if (sendLengths[v.rank()] > 0) {
    std::memmove(out + recvOffsets[v.rank()], in + sendOffsets[v.rank()], sendLengths[v.rank()]);
  }
  v.net.wait(requests);
}

// Everyone on a host arrives, the leaders run a barrier among themselves, and each leader
// releases its host.
void barrier(const Runner& runner, const CpuPlan& plan) {
  const net::Hierarchy& h = *runner.hierarchy;
  const std::optional<shm::Context> local = runner.hostContext(plan);
  if (local) shm::barrier(*local);
  if (h.leaders() != nullptr) {
    const Context& tcp = runner.tcp;
    algo::barrier(
        Context{*h.leaders(), tcp.seq, tcp.what, tcp.deadline, tcp.tunables, plan.algorithm});
  }
  if (local) shm::barrier(*local);
}

}  // namespace xccl::algo::hier
