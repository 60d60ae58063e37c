#include "algo/runner.h"

#include <algorithm>
#include <optional>

#include "algo/reduce.h"

namespace xccl::algo {
namespace {

// Reduce to each host's leader over its segment, all_reduce among the leaders over TCP (AVG as
// a sum, divided there by the group size), broadcast from the leader over the segment. Every
// rank gets the leaders' bytes, which are identical (the TCP algorithms combine in rank order).
void hierarchicalAllReduce(const Runner& runner, const CpuPlan& plan, void* data, size_t count,
                           DataType type, ReduceOp op) {
  const net::Hierarchy& h = *runner.hierarchy;
  const ReduceOp combiner = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  const std::optional<shm::Context> local = runner.hostContext(plan);
  if (local) shm::reduce(*local, data, count, type, combiner, 0);
  if (h.leaders() != nullptr) {
    const Context& tcp = runner.tcp;
    allReduce(Context{*h.leaders(), tcp.seq, tcp.what, tcp.deadline, tcp.tunables, plan.algorithm},
              data, count, type, combiner);
    if (op == ReduceOp::kAvg) divide(type, data, count, runner.size());
  }
  if (local) shm::broadcast(*local, data, count * elementSize(type), 0);
}

}  // namespace

GroupShape Runner::shape() const {
  GroupShape shape{size()};
  if (segment != nullptr) {
    shape.locality = Locality::kOneHost;
    shape.hostRanks = segment->size();
  } else if (hierarchy != nullptr) {
    shape.locality = Locality::kPerHost;
    shape.hosts = hierarchy->hosts();
    shape.hostRanks = hierarchy->segment() != nullptr ? hierarchy->segment()->size() : 1;
  }
  return shape;
}

Context Runner::tcpContext(const CpuPlan& plan) const {
  Context ctx = tcp;
  ctx.algorithm = plan.algorithm;
  return ctx;
}

shm::Context Runner::shmContext(const CpuPlan& plan) const {
  return {*segment, tcp.seq, tcp.what, tcp.deadline, tcp.tunables, alive, plan.algorithm};
}

std::optional<shm::Context> Runner::hostContext(const CpuPlan& plan) const {
  const net::Hierarchy& h = *hierarchy;
  if (h.segment() == nullptr) return std::nullopt;
  // The segment numbers this host's ranks 0..k-1; liveness is asked by group rank.
  net::shm::PeerAlive local;
  if (alive) local = [&h, alive = alive](int peer) { return alive(h.local()[peer]); };
  return shm::Context{*h.segment(), tcp.seq,          tcp.what,          tcp.deadline,
                      tcp.tunables, std::move(local), plan.hostAlgorithm};
}

Runner subCollective(const Runner& runner, size_t i) {
  Runner sub = runner;
  sub.tcp.seq += i;
  return sub;
}

void allReduce(const Runner& runner, void* data, size_t count, DataType type, ReduceOp op) {
  const CpuPlan plan = runner.plan(Collective::kAllReduce, count * elementSize(type));
  switch (plan.route) {
    case CpuRoute::kShm: return shm::allReduce(runner.shmContext(plan), data, count, type, op);
    case CpuRoute::kHierarchical: return hierarchicalAllReduce(runner, plan, data, count, type, op);
    case CpuRoute::kTcp: return allReduce(runner.tcpContext(plan), data, count, type, op);
  }
}

void broadcast(const Runner& runner, void* data, size_t bytes, int root) {
  const CpuPlan plan = runner.plan(Collective::kBroadcast, bytes);
  if (plan.route == CpuRoute::kShm) {
    shm::broadcast(runner.shmContext(plan), data, bytes, root);
  } else {
    broadcast(runner.tcpContext(plan), data, bytes, root);
  }
}

void reduce(const Runner& runner, void* data, size_t count, DataType type, ReduceOp op, int root) {
  const CpuPlan plan = runner.plan(Collective::kReduce, count * elementSize(type));
  if (plan.route == CpuRoute::kShm) {
    shm::reduce(runner.shmContext(plan), data, count, type, op, root);
  } else {
    reduce(runner.tcpContext(plan), data, count, type, op, root);
  }
}

void allGather(const Runner& runner, const void* input, void* output,
               const std::vector<size_t>& bytesPerRank) {
  const size_t largest =
      bytesPerRank.empty() ? 0 : *std::max_element(bytesPerRank.begin(), bytesPerRank.end());
  const CpuPlan plan = runner.plan(Collective::kAllGather, largest);
  if (plan.route == CpuRoute::kShm) {
    shm::allGather(runner.shmContext(plan), input, output, bytesPerRank);
  } else {
    allGather(runner.tcpContext(plan), input, output, bytesPerRank);
  }
}

void reduceScatter(const Runner& runner, const void* input, void* output, size_t count,
                   DataType type, ReduceOp op) {
  const CpuPlan plan = runner.plan(Collective::kReduceScatter, count * elementSize(type));
  if (plan.route == CpuRoute::kShm) {
    shm::reduceScatter(runner.shmContext(plan), input, output, count, type, op);
  } else {
    reduceScatter(runner.tcpContext(plan), input, output, count, type, op);
  }
}

void allToAll(const Runner& runner, const void* input, const std::vector<size_t>& sendOffsets,
              const std::vector<size_t>& sendLengths, void* output,
              const std::vector<size_t>& recvOffsets, const std::vector<size_t>& recvLengths) {
  // The lengths differ per rank; all_to_all's plan does not depend on them.
  const CpuPlan plan = runner.plan(Collective::kAllToAll, 0);
  if (plan.route == CpuRoute::kShm) {
    shm::allToAll(runner.shmContext(plan), input, sendOffsets, sendLengths, output, recvOffsets,
                  recvLengths);
  } else {
    allToAll(runner.tcpContext(plan), input, sendOffsets, sendLengths, output, recvOffsets,
             recvLengths);
  }
}

void gather(const Runner& runner, const void* input, size_t bytes, void* output, int root) {
  const CpuPlan plan = runner.plan(Collective::kGather, bytes);
  if (plan.route == CpuRoute::kShm) {
    shm::gather(runner.shmContext(plan), input, bytes, output, root);
  } else {
    gather(runner.tcpContext(plan), input, bytes, output, root);
  }
}

void scatter(const Runner& runner, const void* input, void* output, size_t bytes, int root) {
  const CpuPlan plan = runner.plan(Collective::kScatter, bytes);
  if (plan.route == CpuRoute::kShm) {
    shm::scatter(runner.shmContext(plan), input, output, bytes, root);
  } else {
    scatter(runner.tcpContext(plan), input, output, bytes, root);
  }
}

void barrier(const Runner& runner) {
  const CpuPlan plan = runner.plan(Collective::kBarrier, 0);
  if (plan.route == CpuRoute::kShm) {
    shm::barrier(runner.shmContext(plan));
  } else {
    barrier(runner.tcpContext(plan));
  }
}

}  // namespace xccl::algo
