#include "algo/runner.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>

#include "algo/hierarchical.h"
#include "algo/test_hooks.h"

namespace xccl::algo {

GroupShape shapeOf(const net::GroupLayout& layout) {
  GroupShape shape{layout.size};
  shape.locality = layout.locality;
  // Every host the ranks are on (planning reads it for kPerHost; a tuning table is matched on it
  // whatever the locality).
  shape.hosts = layout.hosts();
  // The ranks sharing this rank's segment: the whole group on one host, this host's ranks when
  // it spans hosts (1 where this host has one rank: it has no segment).
  if (layout.locality != Locality::kNone) {
    shape.hostRanks = static_cast<int>(layout.ranksOnThisHost().size());
  }
  return shape;
}

CpuPlan Runner::plan(Collective collective, size_t bytes) const {
  // A shape for another group, or a route without its transport, would run collectives no peer
  // runs alike: refuse it rather than hang.
  XCCL_CHECK(shape.worldSize == size() &&
                 (shape.locality != Locality::kOneHost || segment != nullptr) &&
                 (shape.locality != Locality::kPerHost || hierarchy != nullptr),
             "a Runner of ", size(), " ranks planned with the shape of a group of ",
             shape.worldSize, " (", vocab::name(shape.locality), ")");
  return planCpu({collective, bytes}, shape, net.tunables, tuning);
}

namespace {

// A tuned plan's chunk differs from the group's XCCL_RING_CHUNK_BYTES; the plan's wins.
Tunables planned(const Tunables& tunables, const CpuPlan& plan) {
  Tunables out = tunables;
  if (plan.ringChunkBytes != 0) out.ringChunkBytes = plan.ringChunkBytes;
  return out;
}

#if XCCL_TEST_HOOKS
std::atomic<Algorithm> injected{Algorithm::kAuto};

// injectWrongResult's damage to the first element of `data`, when `plan` ran the named algorithm.
void damage(const CpuPlan& plan, void* data, size_t count, DataType type) {
  if (injected.load(std::memory_order_relaxed) != plan.algorithm || count == 0) return;
  switch (type) {
    case DataType::kFloat32: *static_cast<float*>(data) += 1; break;
    case DataType::kFloat64: *static_cast<double*>(data) += 1; break;
    case DataType::kInt32: *static_cast<int32_t*>(data) += 1; break;
    case DataType::kInt64: *static_cast<int64_t*>(data) += 1; break;
    default: *static_cast<uint8_t*>(data) += 1; break;
  }
}
#else
// A build without the test hooks (test_hooks.h) damages nothing.
void damage(const CpuPlan&, void*, size_t, DataType) {}
#endif

void damageBytes(const CpuPlan& plan, void* data, size_t bytes) {
  damage(plan, data, bytes, DataType::kUInt8);
}

}  // namespace

#if XCCL_TEST_HOOKS
void injectWrongResult(Algorithm algorithm) {
  injected.store(algorithm, std::memory_order_relaxed);
}
#endif

Context Runner::netContext(const CpuPlan& plan) const {
  Context ctx = net;
  ctx.algorithm = plan.algorithm;
  ctx.tunables = planned(net.tunables, plan);
  return ctx;
}

shm::Context Runner::shmContext(const CpuPlan& plan) const {
  return {*segment, net.seq, net.what, net.deadline, net.tunables, alive, plan.algorithm};
}

std::optional<shm::Context> Runner::hostContext(const CpuPlan& plan) const {
  const net::Hierarchy& h = *hierarchy;
  if (h.segment() == nullptr) return std::nullopt;
  // The segment numbers this host's ranks 0..k-1; liveness is asked by group rank.
  net::shm::PeerAlive local;
  if (alive) local = [&h, alive = alive](int peer) { return alive(h.local()[peer]); };
  return shm::Context{*h.segment(), net.seq,          net.what,          net.deadline,
                      net.tunables, std::move(local), plan.hostAlgorithm};
}

Context Runner::leadersContext(const CpuPlan& plan) const {
  return Context{*hierarchy->leaders(),       net.seq,       net.what, net.deadline,
                 planned(net.tunables, plan), plan.algorithm};
}

Runner subCollective(const Runner& runner, size_t i) {
  Runner sub = runner;
  sub.net.seq += i;
  return sub;
}

void allReduce(const Runner& runner, void* data, size_t count, DataType type, ReduceOp op) {
  const CpuPlan plan = runner.plan(Collective::kAllReduce, count * elementSize(type));
  [&] {
    switch (plan.route) {
      case CpuRoute::kShm: return shm::allReduce(runner.shmContext(plan), data, count, type, op);
      case CpuRoute::kHierarchical: return hier::allReduce(runner, plan, data, count, type, op);
      case CpuRoute::kNet: return allReduce(runner.netContext(plan), data, count, type, op);
    }
  }();
  damage(plan, data, count, type);
}

void broadcast(const Runner& runner, void* data, size_t bytes, int root) {
  const CpuPlan plan = runner.plan(Collective::kBroadcast, bytes);
  [&] {
    switch (plan.route) {
      case CpuRoute::kShm: return shm::broadcast(runner.shmContext(plan), data, bytes, root);
      case CpuRoute::kHierarchical: return hier::broadcast(runner, plan, data, bytes, root);
      case CpuRoute::kNet: return broadcast(runner.netContext(plan), data, bytes, root);
    }
  }();
  damageBytes(plan, data, bytes);
}

void reduce(const Runner& runner, void* data, size_t count, DataType type, ReduceOp op, int root) {
  const CpuPlan plan = runner.plan(Collective::kReduce, count * elementSize(type));
  [&] {
    switch (plan.route) {
      case CpuRoute::kShm: return shm::reduce(runner.shmContext(plan), data, count, type, op, root);
      case CpuRoute::kHierarchical: return hier::reduce(runner, plan, data, count, type, op, root);
      case CpuRoute::kNet: return reduce(runner.netContext(plan), data, count, type, op, root);
    }
  }();
  if (runner.rank() == root) damage(plan, data, count, type);
}

void allGather(const Runner& runner, const void* input, void* output,
               const std::vector<size_t>& bytesPerRank) {
  const size_t largest =
      bytesPerRank.empty() ? 0 : *std::max_element(bytesPerRank.begin(), bytesPerRank.end());
  const CpuPlan plan = runner.plan(Collective::kAllGather, largest);
  [&] {
    switch (plan.route) {
      case CpuRoute::kShm:
        return shm::allGather(runner.shmContext(plan), input, output, bytesPerRank);
      case CpuRoute::kHierarchical:
        return hier::allGather(runner, plan, input, output, bytesPerRank);
      case CpuRoute::kNet: return allGather(runner.netContext(plan), input, output, bytesPerRank);
    }
  }();
  damageBytes(plan, output, bytesPerRank.empty() ? 0 : bytesPerRank[0]);
}

void reduceScatter(const Runner& runner, const void* input, void* output, size_t count,
                   DataType type, ReduceOp op) {
  const CpuPlan plan = runner.plan(Collective::kReduceScatter, count * elementSize(type));
  [&] {
    switch (plan.route) {
      case CpuRoute::kShm:
        return shm::reduceScatter(runner.shmContext(plan), input, output, count, type, op);
      case CpuRoute::kHierarchical:
        return hier::reduceScatter(runner, plan, input, output, count, type, op);
      case CpuRoute::kNet:
        return reduceScatter(runner.netContext(plan), input, output, count, type, op);
    }
  }();
  damage(plan, output, count, type);
}

void allToAll(const Runner& runner, const void* input, const std::vector<size_t>& sendOffsets,
              const std::vector<size_t>& sendLengths, void* output,
              const std::vector<size_t>& recvOffsets, const std::vector<size_t>& recvLengths) {
  // The lengths differ per rank; all_to_all's plan does not depend on them.
  const CpuPlan plan = runner.plan(Collective::kAllToAll, 0);
  [&] {
    switch (plan.route) {
      case CpuRoute::kShm:
        return shm::allToAll(runner.shmContext(plan), input, sendOffsets, sendLengths, output,
                             recvOffsets, recvLengths);
      case CpuRoute::kHierarchical:
        return hier::allToAll(runner, plan, input, sendOffsets, sendLengths, output, recvOffsets,
                              recvLengths);
      case CpuRoute::kNet:
        return allToAll(runner.netContext(plan), input, sendOffsets, sendLengths, output,
                        recvOffsets, recvLengths);
    }
  }();
  if (!recvLengths.empty())
    damageBytes(plan, static_cast<uint8_t*>(output) + recvOffsets[0], recvLengths[0]);
}

void gather(const Runner& runner, const void* input, size_t bytes, void* output, int root) {
  const CpuPlan plan = runner.plan(Collective::kGather, bytes);
  [&] {
    switch (plan.route) {
      case CpuRoute::kShm: return shm::gather(runner.shmContext(plan), input, bytes, output, root);
      case CpuRoute::kHierarchical: return hier::gather(runner, plan, input, bytes, output, root);
      case CpuRoute::kNet: return gather(runner.netContext(plan), input, bytes, output, root);
    }
  }();
  if (runner.rank() == root) damageBytes(plan, output, bytes);
}

void scatter(const Runner& runner, const void* input, void* output, size_t bytes, int root) {
  const CpuPlan plan = runner.plan(Collective::kScatter, bytes);
  [&] {
    switch (plan.route) {
      case CpuRoute::kShm: return shm::scatter(runner.shmContext(plan), input, output, bytes, root);
      case CpuRoute::kHierarchical: return hier::scatter(runner, plan, input, output, bytes, root);
      case CpuRoute::kNet: return scatter(runner.netContext(plan), input, output, bytes, root);
    }
  }();
  damageBytes(plan, output, bytes);
}

void barrier(const Runner& runner) {
  const CpuPlan plan = runner.plan(Collective::kBarrier, 0);
  switch (plan.route) {
    case CpuRoute::kShm: return shm::barrier(runner.shmContext(plan));
    case CpuRoute::kHierarchical: return hier::barrier(runner, plan);
    case CpuRoute::kNet: return barrier(runner.netContext(plan));
  }
}

}  // namespace xccl::algo
