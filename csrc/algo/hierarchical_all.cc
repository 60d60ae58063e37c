// The hierarchical collectives in which every rank gives and gets: all_reduce, all_gather,
// reduce_scatter, all_to_all and barrier. Overview: hierarchical.h.
#include <cstring>
#include <numeric>

#include "algo/hierarchical.h"
#include "algo/hierarchical_view.h"
#include "algo/reduce.h"
#include "algo/scratch.h"

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

// Reduce to each host's leader over its segment, all_reduce among the leaders over the network
// (AVG as a sum, divided there by the group size), broadcast from the leader over the segment.
// Every rank gets the leaders' bytes, which are identical (the network algorithms combine in rank
// order). Unpipelined: only for hosts with different rank counts, where no rank has a peer of
// the same local index on every host.
void allReduceThroughLeaders(const Runner& runner, const CpuPlan& plan, void* data, size_t count,
                             DataType type, ReduceOp op) {
  const net::Hierarchy& h = *runner.hierarchy;
  const ReduceOp combiner = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const std::optional<shm::Context> local = runner.hostContext(plan);
  if (local) shm::reduce(*local, data, count, type, combiner, 0);
  if (h.leaders() != nullptr) {
    algo::allReduce(runner.leadersContext(plan), data, count, type, combiner);
    if (op == ReduceOp::kAvg) divide(type, data, count, runner.size());
  }
  if (local) shm::broadcast(*local, data, count * elementSize(type), 0);
}

bool evenHosts(const View& v) {
  for (int g = 1; g < v.hosts(); ++g) {
    if (v.ranksOn(g).size() != v.ranksOn(0).size()) return false;
  }
  return true;
}

}  // namespace

// Hosts of k ranks each (else allReduceThroughLeaders). The message is cut into rounds of k
// pieces of one chunk; in round r:
//  1. an in-host reduce_scatter leaves piece i of the round, summed over the host, at local
//     rank i (all k ranks reduce, two-shot style; a short last round is padded to k pieces);
//  2. local rank i sends it to local rank i of every other host and combines the H host sums it
//     then holds in host order (AVG: summed, then divided once by the group size);
//  3. an in-host all_gather puts the round's k combined pieces in place on every rank.
// Step 2 of round r completes after step 1 of round r + 1: the transport moves round r between
// hosts while the segment reduces the next one. Every rank of a column combines the same host
// sums in the same order, and the all_gather copies them: every rank gets the same bytes.
// Pieces sent and received live in kWindow slots reused round after round (bounded memory that
// stays in cache); receives are posted kWindow rounds ahead.
void allReduce(const Runner& runner, const CpuPlan& plan, void* data, size_t count, DataType type,
               ReduceOp op) {
  if (count == 0) return;
  const View v(runner, plan, opSignature(CollectiveKind::kAllReduce, type, op));
  if (!evenHosts(v)) return allReduceThroughLeaders(runner, plan, data, count, type, op);
  constexpr size_t kWindow = 4;
  const ReduceOp combiner = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const size_t es = elementSize(type), piece = std::max<size_t>(1, v.chunk / es);
  const int hosts = v.hosts(), host = v.host(), index = v.localIndex(v.rank());
  const size_t k = v.ranksOn(host).size(), round = k * piece;
  const size_t rounds = detail::chunksOf(count, round);
  auto* out = static_cast<uint8_t*>(data);
  // Elements of round r (at r * round) and of each of its pieces.
  const auto extent = [&](size_t r) { return std::min(round, count - r * round); };
  const auto perRank = [&](size_t r) { return detail::chunksOf(extent(r), k); };
  const size_t slotBytes = perRank(0) * es;  // the first round's pieces are the largest
  const size_t slots = std::min(kWindow, rounds);

  // Round r's host sum at mine[r % slots], host d's (after this one) at theirs[r % slots][d - 1].
  ScratchBytes mine(slots * slotBytes), theirs(slots * (hosts - 1) * slotBytes), sum(slotBytes);
  // Zero-filled: the padding past the last round's elements is reduced too (and dropped).
  std::vector<uint8_t> padded(extent(rounds - 1) == k * perRank(rounds - 1) ? 0 : round * es);
  const auto ours = [&](size_t r) { return mine.data() + r % slots * slotBytes; };
  const auto from = [&](size_t r, int d) {
    return theirs.data() + (r % slots * (hosts - 1) + d - 1) * slotBytes;
  };
  std::vector<int> peers;  // by host distance d - 1
  for (int d = 1; d < hosts; ++d) peers.push_back(v.ranksOn(v.hostAfter(host, d))[index]);
  std::vector<std::vector<net::RequestPtr>> recvs(rounds), sends(rounds);
  const auto post = [&](size_t r) {
    for (int d = 1; r < rounds && d < hosts; ++d) {
      recvs[r].push_back(v.net.irecv(peers[d - 1], r, from(r, d), perRank(r) * es));
    }
  };
  const auto scatterRound = [&](size_t r) {
    if (r >= slots) v.net.wait(sends[r - slots]);  // its slot's previous piece went out
    uint8_t* in = out + r * round * es;
    if (extent(r) < k * perRank(r)) {
      in = static_cast<uint8_t*>(std::memcpy(padded.data(), in, extent(r) * es));
    }
    if (v.local) {
      shm::reduceScatter(*v.local, in, ours(r), perRank(r), type, combiner);
    } else {
      std::memcpy(ours(r), in, perRank(r) * es);
    }
    for (int peer : peers) sends[r].push_back(v.net.isend(peer, r, ours(r), perRank(r) * es));
  };
  const auto gatherRound = [&](size_t r) {
    v.net.wait(recvs[r]);
    std::vector<const void*> srcs(hosts);
    for (int d = 0; d < hosts; ++d) srcs[v.hostAfter(host, d)] = d == 0 ? ours(r) : from(r, d);
    reduceMany(type, combiner, sum.data(), srcs.data(), hosts, perRank(r));
    post(r + slots);  // into the slot just read
    if (op == ReduceOp::kAvg) divide(type, sum.data(), perRank(r), v.size());
    const bool pad = extent(r) < k * perRank(r);
    uint8_t* to = pad ? padded.data() : out + r * round * es;
    if (v.local) {
      shm::allGather(*v.local, sum.data(), to, std::vector<size_t>(k, perRank(r) * es));
    } else {
      std::memcpy(to, sum.data(), perRank(r) * es);
    }
    if (pad) std::memcpy(out + r * round * es, padded.data(), extent(r) * es);
  };
  for (size_t r = 0; r < slots; ++r) post(r);
  for (size_t r = 0; r < rounds; ++r) {
    scatterRound(r);
    if (r > 0) gatherRound(r - 1);
  }
  gatherRound(rounds - 1);
  for (size_t r = rounds > slots ? rounds - slots : 0; r < rounds; ++r) v.net.wait(sends[r]);
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
      ScratchBytes parts(std::accumulate(lengths.begin(), lengths.end(), size_t{0}));
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
  ScratchBytes packed((leads ? base[hosts] : widest * std::min(chunk, count)) * es);
  ScratchBytes partials(leads ? (hosts - 1) * k * count * es : 0);
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
    algo::barrier(runner.leadersContext(plan));
  }
  if (local) shm::barrier(*local);
}

}  // namespace xccl::algo::hier
