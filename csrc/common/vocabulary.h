// The plan's vocabulary: every name a user, a tuning table, a log or `python -m xccl plan` sees
// for collectives, routes, algorithms and GPU kernels, declared once here with the combinations
// that are legal. Everything else derives from these tables: the planners (algo/cpu_plan.h,
// algo/gpu_plan.h), the tuning table's parser and printer (algo/tuning.h), XCCL_ALGO and
// XCCL_GPU_ALGO (common/env.cc's registry and algo/tunables.h), the plan rows, and Python's
// tuning schema and tuner (python/xccl/vocabulary.py, through xccl._native.vocabulary()).
// tests/python/test_vocabulary.py fails when one of these names is spelled anywhere else.
//
// Adding an algorithm or a kernel is one row here plus its executor; the enums' order is the
// tables' order (each row repeats its enumerator and a static_assert checks it), and what is
// printed in which order (XCCL_ALGO's accepted list, the schema's error messages) follows it.
//
// It lives in common/, the bottom layer, because common/env.cc's registry reads it (the algo/
// enums are these, re-exported there), and so it includes only the standard library.
#pragma once

#include <cstddef>
#include <cstdint>

namespace xccl::vocab {

// Words shared by several tables below (a route and an algorithm, an algorithm and a kernel
// family, a kernel family and a forced GPU choice).
inline constexpr const char kOneShotWord[] = "one_shot";
inline constexpr const char kTwoShotWord[] = "two_shot";
inline constexpr const char kShmWord[] = "shm";
inline constexpr const char kAutoWord[] = "auto";
inline constexpr const char kNoneWord[] = "none";

// ---- Collectives on host memory (algo/cpu_plan.h) ----

enum class Collective {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAllToAll,  // all_to_all, gather, scatter and barrier have one network algorithm each (direct)
  kGather,
  kScatter,
  kBarrier,
};

struct CollectiveRow {
  Collective id;
  const char* name;
  bool ring;           // the network transport has a ring for it (else only direct)
  bool shmReduction;   // over one host's segment: one-shot or two-shot (else the shm collective)
  bool hostReduction;  // hierarchical: an in-host one-shot or two-shot reduction step
  // Planned without a size (ranks' lengths may differ): only a tuning entry over every size
  // ([0, inf)) applies to it.
  bool wholeRange;
};

inline constexpr CollectiveRow kCollectiveRows[] = {
    {Collective::kAllReduce, "all_reduce", true, true, true, false},
    {Collective::kAllGather, "all_gather", true, false, false, false},
    {Collective::kReduceScatter, "reduce_scatter", true, false, true, false},
    {Collective::kBroadcast, "broadcast", true, false, false, false},
    {Collective::kReduce, "reduce", true, true, true, false},
    {Collective::kAllToAll, "all_to_all", false, false, false, true},
    {Collective::kGather, "gather", false, false, false, false},
    {Collective::kScatter, "scatter", false, false, false, false},
    {Collective::kBarrier, "barrier", false, false, false, false},
};

// The collectives whose shared-memory bodies have a single-copy path (peers' buffers read with
// process_vm_readv, docs/shm.md): each has its own threshold (algo/tunables.h), set per
// collective with XCCL_SHM_CMA_MIN_BYTES.
inline constexpr Collective kShmSingleCopyCollectives[] = {Collective::kAllReduce,
                                                           Collective::kReduce,
                                                           Collective::kAllGather,
                                                           Collective::kBroadcast};

// ---- Routes on host memory ----

enum class CpuRoute {
  // The network transport, whichever engine (tcp or ofi, net/transport/factory.h) carries it. Named
  // "tcp"
  // in plans, tuning tables and logs: the name predates the ofi engine, and tables written with
  // it must keep parsing.
  kNet,
  kShm,  // one host's shared-memory segment (algo/shm_collectives.h)
  kHierarchical,  // a segment per host and the network between hosts (algo/hierarchical.h)
};

struct CpuRouteRow {
  CpuRoute id;
  const char* name;
};

inline constexpr CpuRouteRow kCpuRouteRows[] = {
    {CpuRoute::kNet, "tcp"},
    {CpuRoute::kShm, kShmWord},
    {CpuRoute::kHierarchical, "hierarchical"},
};

// ---- Algorithms on host memory ----

enum class Algorithm {
  kAuto,  // let planCpu decide
  kDirect,  // every rank exchanges with every other in one step: fewest hops, most bytes
  kRing,  // chunk-pipelined ring: bandwidth-optimal bytes on the wire, 2(n-1) or n-1 steps
  // The two shared-memory reductions (all_reduce, reduce): one step, every rank reduces all n
  // slots; or two steps, each rank reduces 1/n and copies the reduced slices (docs/shm.md).
  kOneShot,
  kTwoShot,
  kShm,  // the shared-memory collectives (algo/shm_collectives.h): ranks on one host only
};

// What an algorithm is, for the legal (collective, route, algorithm) triples (cpuLegal).
enum class AlgorithmKind {
  kPlanner,  // auto: not an algorithm a plan or a table names
  kNetwork,  // the network transport's (tcp)
  kShot,  // a shared-memory reduction: one host's (shm), or a hierarchical in-host step
  kSegment,  // the shared-memory collective of the collectives that are not reductions
};

struct AlgorithmRow {
  Algorithm id;
  const char* name;
  AlgorithmKind kind;
  bool forceable;  // XCCL_ALGO (and the group's options) may name it
  bool needsRing;  // only for collectives with a ring (CollectiveRow::ring)
};

inline constexpr AlgorithmRow kAlgorithmRows[] = {
    {Algorithm::kAuto, kAutoWord, AlgorithmKind::kPlanner, true, false},
    {Algorithm::kDirect, "direct", AlgorithmKind::kNetwork, true, false},
    {Algorithm::kRing, "ring", AlgorithmKind::kNetwork, true, true},
    {Algorithm::kOneShot, kOneShotWord, AlgorithmKind::kShot, false, false},
    {Algorithm::kTwoShot, kTwoShotWord, AlgorithmKind::kShot, false, false},
    {Algorithm::kShm, kShmWord, AlgorithmKind::kSegment, true, false},
};

// Whether a tuning table may say that `collective` runs `algorithm` over `route`:
//   tcp: a network algorithm the collective has (direct always, ring where it has one);
//   shm: a shot for the shm reductions (all_reduce, reduce), shm for the others;
//   hierarchical: the rules' plan with the table's chunk; a shot chooses the in-host
//     reduction, so only for collectives with one (all_reduce, reduce, reduce_scatter).
// kAuto is never legal: a table names what it measured.
bool cpuLegal(Collective collective, CpuRoute route, Algorithm algorithm);

// ---- GPU collectives, routes and kernels (algo/gpu_plan.h) ----

enum class GpuCollective : uint8_t {
  kAllReduce,
  kReduce,  // no GPU kernel
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kAllToAll,
  // Any other operation on CUDA tensors (gather, scatter, reduce, list forms, point-to-point):
  // no kernel, so the vendor library or host memory.
  kOther,
};

struct GpuCollectiveRow {
  GpuCollective id;
  const char* name;
};

inline constexpr GpuCollectiveRow kGpuCollectiveRows[] = {
    {GpuCollective::kAllReduce, "all_reduce"}, {GpuCollective::kReduce, "reduce"},
    {GpuCollective::kAllGather, "all_gather"}, {GpuCollective::kReduceScatter, "reduce_scatter"},
    {GpuCollective::kBroadcast, "broadcast"},  {GpuCollective::kAllToAll, "all_to_all"},
    {GpuCollective::kOther, "other"},
};

enum class GpuRoute : uint8_t {
  kKernel,  // one of xccl's kernels over CUDA/HIP IPC peer buffers
  kVendor,  // NCCL (RCCL on AMD) through the backend's inner ProcessGroupNCCL
  kHost,  // copy to host memory and run the CPU algorithms: the only way left when ranks share
          // a GPU (which NCCL refuses) and no kernel can run the request
  kLocal,  // world size 1 outside a coalesced batch: nothing, one copy or one scaling on the
           // caller's stream
};

struct GpuRouteRow {
  GpuRoute id;
  const char* name;
  bool tunable;  // a tuning table may choose it (kernel or vendor where the rules allow both)
};

inline constexpr GpuRouteRow kGpuRouteRows[] = {
    {GpuRoute::kKernel, "kernel", true},
    {GpuRoute::kVendor, "vendor", true},
    {GpuRoute::kHost, "host", false},
    {GpuRoute::kLocal, "local", false},
};

// The kernels of kernels/launch.h, by the launcher and algorithm that run them.
enum class GpuKernel : uint8_t {
  kNone,  // the plan does not run a kernel
  kOneShotAllReduce,  // launchAllReduce, kernels::Algorithm::kOneShot
  kTwoShotAllReduce,  // launchAllReduce, kernels::Algorithm::kTwoShot
  kAllPairsAllGather,  // launchAllGather
  kAllPairsReduceScatter,  // launchReduceScatter
  kAllPairsAllToAll,  // launchAllToAll
  kBroadcast,  // launchBroadcast
};

inline constexpr const char kAllPairsWord[] = "all_pairs";

struct GpuKernelRow {
  GpuKernel id;
  const char* name;  // the kernel itself, for errors and tests
  // Its family: what plans print, tuning tables write and XCCL_GPU_ALGO forces ("one_shot";
  // all_pairs names the three all-pairs kernels, each of its own collective).
  const char* family;
  GpuCollective collective;  // the one collective it runs (kOther for kNone)
};

inline constexpr GpuKernelRow kGpuKernelRows[] = {
    {GpuKernel::kNone, kNoneWord, kNoneWord, GpuCollective::kOther},
    {GpuKernel::kOneShotAllReduce, "one_shot_all_reduce", kOneShotWord, GpuCollective::kAllReduce},
    {GpuKernel::kTwoShotAllReduce, "two_shot_all_reduce", kTwoShotWord, GpuCollective::kAllReduce},
    {GpuKernel::kAllPairsAllGather, "all_pairs_all_gather", kAllPairsWord,
     GpuCollective::kAllGather},
    {GpuKernel::kAllPairsReduceScatter, "all_pairs_reduce_scatter", kAllPairsWord,
     GpuCollective::kReduceScatter},
    {GpuKernel::kAllPairsAllToAll, "all_pairs_all_to_all", kAllPairsWord, GpuCollective::kAllToAll},
    {GpuKernel::kBroadcast, "broadcast", "broadcast", GpuCollective::kBroadcast},
};

// The vendor libraries a kVendor plan names: torch's ProcessGroupNCCL wraps NCCL, or RCCL on
// AMD GPUs.
inline constexpr const char kNcclWord[] = "nccl";
inline constexpr const char kRcclWord[] = "rccl";

// ---- XCCL_GPU_ALGO: a forced GPU plan ----
//
// A forced choice applies to the collectives that have it and where it can run (one host, at
// most kGpuMaxRanks ranks, a kernel for the dtype and op, peer access between the GPUs);
// everything else is planned as usual.
enum class GpuForce : uint8_t {
  kAuto,
  kVendor,  // every collective to the vendor library
  kKernel,  // a kernel wherever one can run, whatever the size or fabric policy
  kOneShot,  // all_reduce only
  kTwoShot,  // all_reduce only
  kAllPairs,  // all_gather, reduce_scatter, all_to_all
};

struct GpuForceRow {
  GpuForce id;
  // The canonical name, then its synonyms (nullptr: none).
  const char* name;
  const char* synonyms[2];
};

inline constexpr GpuForceRow kGpuForceRows[] = {
    {GpuForce::kAuto, kAutoWord, {nullptr, nullptr}},
    {GpuForce::kVendor, kNcclWord, {kRcclWord, "vendor"}},
    {GpuForce::kKernel, "kernel", {nullptr, nullptr}},
    {GpuForce::kOneShot, kOneShotWord, {nullptr, nullptr}},
    {GpuForce::kTwoShot, kTwoShotWord, {nullptr, nullptr}},
    {GpuForce::kAllPairs, kAllPairsWord, {nullptr, nullptr}},
};

// ---- Where a group's ranks share memory (the tuning table's world line) ----

enum class Locality {
  kNone,  // none: every collective over the network transport
  kOneHost,  // every rank on one host: one segment for the group
  kPerHost,  // several hosts, some with several ranks: one segment per such host
};

struct LocalityRow {
  Locality id;
  const char* name;
};

inline constexpr LocalityRow kLocalityRows[] = {
    {Locality::kNone, kNoneWord},
    {Locality::kOneHost, "one_host"},
    {Locality::kPerHost, "per_host"},
};

// ---- Lookups ----

// The row of `id` (rows are in the enums' order).
template <typename Row, size_t N, typename Id>
constexpr const Row& rowOf(const Row (&rows)[N], Id id) {
  return rows[static_cast<size_t>(id)];
}

// The names, "?" for a value outside its enum.
const char* name(Collective c);
const char* name(CpuRoute r);
const char* name(Algorithm a);
const char* name(GpuCollective c);
const char* name(GpuRoute r);
const char* name(GpuKernel k);
const char* name(GpuForce f);
const char* name(Locality l);
const char* family(GpuKernel k);

// The value a name (exactly as declared) stands for; false for none.
bool lookup(const char* text, Collective* out);
bool lookup(const char* text, CpuRoute* out);
bool lookup(const char* text, Algorithm* out);
bool lookup(const char* text, GpuCollective* out);
bool lookup(const char* text, GpuRoute* out);
bool lookup(const char* text, Locality* out);

// Whether any kernel runs `collective`.
bool hasKernel(GpuCollective collective);
// The kernel of family `family` that runs `collective`; kNone (and false) for none. "none" is
// kNone for every collective (true).
bool kernelOf(GpuCollective collective, const char* family, GpuKernel* out);

}  // namespace xccl::vocab
