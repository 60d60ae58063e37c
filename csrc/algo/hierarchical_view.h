// Internal to the hierarchical collectives (hierarchical.h): one call's view of the hosts, its
// network context and the chunking they share.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "algo/runner.h"

namespace xccl::algo::hier::detail {

class View {
 public:
  // `signature`: the collective's opSignature, stamped on every network message.
  View(const Runner& runner, const CpuPlan& plan, uint32_t signature)
      : hierarchy_(*runner.hierarchy),
        net(runner.net.as(signature)),
        local(runner.hostContext(plan)),
        chunk(std::max<size_t>(1, plan.ringChunkBytes)) {
    const net::Hosts& hosts = hierarchy_.placement();
    for (int h = 0; h < hosts.count(); ++h) ranks_.push_back(hosts.ranksOn(h));
  }

  int rank() const { return net.rank(); }
  int size() const { return net.size(); }
  int hosts() const { return static_cast<int>(ranks_.size()); }
  int hostOf(int rank) const { return hierarchy_.placement().hostOf[rank]; }
  int host() const { return hostOf(rank()); }
  // A host's ranks, ascending (index = local rank in its segment); the first leads.
  const std::vector<int>& ranksOn(int host) const { return ranks_[host]; }
  int leader(int host) const { return ranks_[host].front(); }
  int localIndex(int rank) const {
    const std::vector<int>& on = ranks_[hostOf(rank)];
    return static_cast<int>(std::find(on.begin(), on.end(), rank) - on.begin());
  }
  // Who talks to the other hosts for `host` in a collective rooted at `root` (-1: none).
  int agent(int host, int root) const {
    return root >= 0 && hostOf(root) == host ? root : leader(host);
  }
  // The host `steps` hosts after `host` in host order (wrapping).
  int hostAfter(int host, int steps) const {
    return ((host + steps) % hosts() + hosts()) % hosts();
  }
  void waitOne(const net::RequestPtr& request) const { net.wait({request}); }

 private:
  const net::Hierarchy& hierarchy_;
  std::vector<std::vector<int>> ranks_;

 public:
  const Context net;  // the group's transport (group ranks), messages stamped with the signature
  const std::optional<shm::Context> local;  // this host's segment; empty where it has one rank
  const size_t chunk;                        // the pipelining unit (bytes, or elements)
};

// Calls f(index, offset, length) for each chunk of `total` units in order.
template <typename F>
void forEachChunk(size_t total, size_t chunk, F f) {
  uint32_t index = 0;
  for (size_t offset = 0; offset < total; offset += chunk, ++index) {
    f(index, offset, std::min(chunk, total - offset));
  }
}

inline size_t chunksOf(size_t total, size_t chunk) { return (total + chunk - 1) / chunk; }

// Message steps of per-rank parts sent in chunks: part r's chunk c travels as step first[r] + c,
// unique within the call whatever pair of ranks carries it.
struct Pieces {
  std::vector<uint32_t> first;
  Pieces(const std::vector<size_t>& lengths, size_t chunk) : first(lengths.size() + 1, 0) {
    for (size_t r = 0; r < lengths.size(); ++r) {
      first[r + 1] = first[r] + static_cast<uint32_t>(chunksOf(lengths[r], chunk));
    }
  }
  uint32_t step(int rank, uint32_t chunkIndex) const { return first[rank] + chunkIndex; }
};

}  // namespace xccl::algo::hier::detail
