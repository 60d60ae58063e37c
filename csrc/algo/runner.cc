#include "algo/runner.h"

#include <algorithm>
#include <optional>

#include "algo/reduce.h"

namespace xccl::algo {
namespace {

// Reduce to each host's leader over its segment, all_reduce among the leaders over TCP (AVG as
// a sum, divided there by the group size), broadcast from the leader over the segment. Every
// rank gets the leaders' bytes, which are identical (the TCP algorithms combine in rank order).
void hierarchicalAllReduce(const Runner& runner, void* data, size_t count, DataType type,
                           ReduceOp op) {
  const net::Hierarchy& h = *runner.hierarchy;
  const ReduceOp combiner = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  std::optional<shm::Context> local;
  if (h.segment() != nullptr) {
    // The segment numbers this host's ranks 0..k-1; liveness is asked by group rank.
    net::shm::PeerAlive alive;
    if (runner.alive) alive = [&](int peer) { return runner.alive(h.local()[peer]); };
    local.emplace(shm::Context{*h.segment(), runner.tcp.seq, runner.tcp.what,
                               runner.tcp.deadline, runner.shmTunables, std::move(alive)});
    shm::reduce(*local, data, count, type, combiner, 0);
  }
  if (h.leaders() != nullptr) {
    const Context& tcp = runner.tcp;
    allReduce(Context{*h.leaders(), tcp.seq, tcp.what, tcp.deadline, tcp.tunables}, data, count,
              type, combiner);
    if (op == ReduceOp::kAvg) divide(type, data, count, runner.size());
  }
  if (local) shm::broadcast(*local, data, count * elementSize(type), 0);
}

}  // namespace

Locality Runner::locality() const {
  if (segment != nullptr) return Locality::kOneHost;
  return hierarchy != nullptr ? Locality::kPerHost : Locality::kNone;
}

Algorithm Runner::choose(Collective collective, size_t bytes) const {
  return select(collective, bytes, size(), tcp.tunables, locality());
}

shm::Context Runner::shmContext() const {
  return {*segment, tcp.seq, tcp.what, tcp.deadline, shmTunables, alive};
}

Runner subCollective(const Runner& runner, size_t i) {
  Runner sub = runner;
  sub.tcp.seq += i;
  return sub;
}

void allReduce(const Runner& runner, void* data, size_t count, DataType type, ReduceOp op) {
  switch (runner.choose(Collective::kAllReduce, count * elementSize(type))) {
    case Algorithm::kShm: return shm::allReduce(runner.shmContext(), data, count, type, op);
    case Algorithm::kHierarchical: return hierarchicalAllReduce(runner, data, count, type, op);
    default: return allReduce(runner.tcp, data, count, type, op);
  }
}

void broadcast(const Runner& runner, void* data, size_t bytes, int root) {
  if (runner.onShm(Collective::kBroadcast, bytes)) {
    shm::broadcast(runner.shmContext(), data, bytes, root);
  } else {
    broadcast(runner.tcp, data, bytes, root);
  }
}

void reduce(const Runner& runner, void* data, size_t count, DataType type, ReduceOp op,
            int root) {
  if (runner.onShm(Collective::kReduce, count * elementSize(type))) {
    shm::reduce(runner.shmContext(), data, count, type, op, root);
  } else {
    reduce(runner.tcp, data, count, type, op, root);
  }
}

void allGather(const Runner& runner, const void* input, void* output,
               const std::vector<size_t>& bytesPerRank) {
  const size_t largest =
      bytesPerRank.empty() ? 0 : *std::max_element(bytesPerRank.begin(), bytesPerRank.end());
  if (runner.onShm(Collective::kAllGather, largest)) {
    shm::allGather(runner.shmContext(), input, output, bytesPerRank);
  } else {
    allGather(runner.tcp, input, output, bytesPerRank);
  }
}

void reduceScatter(const Runner& runner, const void* input, void* output, size_t count,
                   DataType type, ReduceOp op) {
  if (runner.onShm(Collective::kReduceScatter, count * elementSize(type))) {
    shm::reduceScatter(runner.shmContext(), input, output, count, type, op);
  } else {
    reduceScatter(runner.tcp, input, output, count, type, op);
  }
}

void allToAll(const Runner& runner, const void* input, const std::vector<size_t>& sendOffsets,
              const std::vector<size_t>& sendLengths, void* output,
              const std::vector<size_t>& recvOffsets, const std::vector<size_t>& recvLengths) {
  // The lengths differ per rank; all_to_all's choice does not depend on them.
  if (runner.onShm(Collective::kAllToAll, 0)) {
    shm::allToAll(runner.shmContext(), input, sendOffsets, sendLengths, output, recvOffsets,
                  recvLengths);
  } else {
    allToAll(runner.tcp, input, sendOffsets, sendLengths, output, recvOffsets, recvLengths);
  }
}

void gather(const Runner& runner, const void* input, size_t bytes, void* output, int root) {
  if (runner.onShm(Collective::kGather, bytes)) {
    shm::gather(runner.shmContext(), input, bytes, output, root);
  } else {
    gather(runner.tcp, input, bytes, output, root);
  }
}

void scatter(const Runner& runner, const void* input, void* output, size_t bytes, int root) {
  if (runner.onShm(Collective::kScatter, bytes)) {
    shm::scatter(runner.shmContext(), input, output, bytes, root);
  } else {
    scatter(runner.tcp, input, output, bytes, root);
  }
}

void barrier(const Runner& runner) {
  if (runner.onShm(Collective::kBarrier, 0)) {
    shm::barrier(runner.shmContext());
  } else {
    barrier(runner.tcp);
  }
}

}  // namespace xccl::algo
