// The collectives of a group that spans hosts with several ranks on some host (planCpu's
// kHierarchical route, algo/cpu_plan.h): shared memory inside each host (the host's segment of
// net::Hierarchy), the network only between hosts, one agent per host talking to the others.
// The agent is the host's leader (its lowest rank), or the root itself on the root's host for
// the rooted collectives, which saves an in-host hop there. all_reduce on hosts of equal size
// has no agent: every rank exchanges its slice of the host's sum with its peers on other hosts.
//
// Pipelined: messages are cut into chunks of the plan's ringChunkBytes, the network requests of
// every chunk are posted up front (all_reduce: a window of rounds ahead), and the transport's
// progress thread moves chunk k+1 between hosts while the agent runs the in-host step of chunk
// k (and the reverse on the sending side).
// Results are laid out by group rank whatever the hosts' sizes or the order of ranks on them.
// Reductions combine the host's ranks first, then the hosts in a fixed order: every rank gets
// the same bytes where several do (all_reduce), but not necessarily the flat path's rounding.
// Steps and bytes between hosts: docs/algorithms.md ("Hierarchical collectives").
//
// Each function has the semantics of collective_signatures.h and is called by algo::Runner with
// a plan whose route is kHierarchical (runner.hierarchy set). Every network wait is bounded by
// the call's deadline and names the peer rank; every in-host wait as in shm_collectives.h.
#pragma once

#include <vector>

#include "algo/runner.h"

namespace xccl::algo::hier {

void allReduce(const Runner& runner, const CpuPlan& plan, void* data, size_t count, DataType type,
               ReduceOp op);
void broadcast(const Runner& runner, const CpuPlan& plan, void* data, size_t bytes, int root);
void reduce(const Runner& runner, const CpuPlan& plan, void* data, size_t count, DataType type,
            ReduceOp op, int root);
void allGather(const Runner& runner, const CpuPlan& plan, const void* input, void* output,
               const std::vector<size_t>& bytesPerRank);
void reduceScatter(const Runner& runner, const CpuPlan& plan, const void* input, void* output,
                   size_t count, DataType type, ReduceOp op);
void allToAll(const Runner& runner, const CpuPlan& plan, const void* input,
              const std::vector<size_t>& sendOffsets, const std::vector<size_t>& sendLengths,
              void* output, const std::vector<size_t>& recvOffsets,
              const std::vector<size_t>& recvLengths);
void gather(const Runner& runner, const CpuPlan& plan, const void* input, size_t bytes,
            void* output, int root);
void scatter(const Runner& runner, const CpuPlan& plan, const void* input, void* output,
             size_t bytes, int root);
void barrier(const Runner& runner, const CpuPlan& plan);

}  // namespace xccl::algo::hier
