// What xccl will do, per collective and message size, on a machine: the rows `python -m xccl
// plan` prints (docs/algorithms.md, "Seeing the plan"). A pure function over planCpu or planGpu,
// like NCCL_DEBUG=INFO's tuning lines but without running anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algo/tunables.h"
#include "algo/tuning.h"
#include "topo/topology.h"

namespace xccl::algo {

struct PlanQuery {
  bool gpu = false;   // planGpu for CUDA/HIP tensors; planCpu for host tensors
  int worldSize = 1;  // ranks in the group
  // Hosts the ranks are spread over, evenly (world divisible by hosts). On CPUs, one host means
  // one shared-memory segment (assumed available: XCCL_SHM_DISABLE and a full /dev/shm are not
  // modelled); several hosts with several ranks each mean hierarchical all_reduce.
  int hosts = 1;
  // Message sizes in nccl-tests' convention (all_gather: the output; reduce_scatter and
  // all_to_all: the input; the others: the buffer). Empty: 1 KiB to 1 GiB in steps of 4x.
  std::vector<size_t> sizes;
  // GPUs: whether xccl's kernels count as verified on the machine (GpuRequest::kernelsVerified):
  // unverified, only a forced XCCL_GPU_ALGO plans a kernel.
  bool kernelsVerified = false;
  // A measured tuning table (algo/tuning.h) to plan with, as a group of this shape would; null:
  // the rules alone. A table made for another shape is a kInvalidArgument naming both.
  const TuningTable* tuning = nullptr;
};

struct PlanRow {
  std::string collective;  // "all_reduce", ...
  size_t bytes = 0;        // the message, as in PlanQuery::sizes
  std::string route;       // CPU: tcp, shm, hierarchical; GPU: kernel, vendor, host, local
  std::string algorithm;   // e.g. "ring (512 KiB chunks)", "two_shot", "nccl"
  std::string reason;      // the rule that decided
  std::string decision = "rule";  // "tuned" where the tuning table decided, else "rule"
  uint64_t tunedNs = 0;            // the deciding entry's measured medians; 0 for rule rows
  uint64_t ruleNs = 0;
};

// GPUs: this host's ranks use the first world/hosts GPUs of `topology`, several ranks per GPU
// when there are more ranks than GPUs. Throws kInvalidArgument for a malformed query.
std::vector<PlanRow> planRows(const PlanQuery& query, const topo::Topology& topology,
                              const Tunables& tunables);

}  // namespace xccl::algo
