// A measured tuning table: per collective and message size, the choice `python -m xccl tune`
// found fastest on this machine (docs/tuning.md), which planCpu and planGpu take beside the
// Tunables. The text below is what travels through the store at group creation (rank 0's, agreed
// by every rank: algo/tuning_agree.h), so the parser treats every byte as hostile.
//
// The canonical text ('\n'-separated, fields separated by single spaces, no comments):
//   xccl-tuning 1
//   world <size> <hosts> <locality>
//   cpu <collective> <min_bytes> <max_bytes> <route> <algorithm> <ring_chunk_bytes> <tuned_ns>
//       <rule_ns>
//   gpu <collective> <min_bytes> <max_bytes> <route> <kernel> <tuned_ns> <rule_ns>
// Sizes are messages in nccl-tests' convention (all_gather the output, reduce_scatter and
// all_to_all the input, the others the buffer); an entry covers min_bytes <= message < max_bytes
// (max_bytes may be `inf`). Ranges of one (device, collective) never overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algo/cpu_plan.h"
#include "algo/gpu_plan.h"

namespace xccl::algo {

constexpr size_t kTuningMaxTextBytes = 1024 * 1024;
constexpr size_t kTuningMaxEntries = 4096;  // cpu and gpu lines together
constexpr uint64_t kTuningInf = UINT64_MAX;  // max_bytes `inf`
constexpr uint64_t kTuningMinChunkBytes = 4096;
constexpr uint64_t kTuningMaxChunkBytes = uint64_t{1} << 30;

struct CpuTuningEntry {
  Collective collective = Collective::kAllReduce;
  uint64_t minBytes = 0;
  uint64_t maxBytes = kTuningInf;  // exclusive; kTuningInf: no upper end
  // kNet: kDirect or kRing (ring where the collective has one). kShm: kOneShot or kTwoShot for
  // all_reduce and reduce, kShm for the others. kHierarchical: the rules' plan with this entry's
  // chunk, and the in-host reduction (kOneShot or kTwoShot) of all_reduce, reduce and
  // reduce_scatter; kDirect/kRing/kShm leave the rules' network pattern and in-host step as they
  // are.
  CpuRoute route = CpuRoute::kNet;
  Algorithm algorithm = Algorithm::kDirect;
  uint64_t ringChunkBytes = 0;  // 0: Tunables::ringChunkBytes
  uint64_t tunedNs = 0;  // medians at the measured size(s), for display only; 0: not measured
  uint64_t ruleNs = 0;
};

struct GpuTuningEntry {
  GpuCollective collective = GpuCollective::kAllReduce;
  uint64_t minBytes = 0;
  uint64_t maxBytes = kTuningInf;
  GpuRoute route = GpuRoute::kVendor;  // kKernel or kVendor
  GpuKernel kernel = GpuKernel::kNone;  // kNone iff route is kVendor
  uint64_t tunedNs = 0;
  uint64_t ruleNs = 0;
};

struct TuningTable {
  // The group the table was measured on; a group of another shape does not use it.
  int worldSize = 1;
  int hosts = 1;
  Locality locality = Locality::kNone;
  std::vector<CpuTuningEntry> cpu;  // in the text's order
  std::vector<GpuTuningEntry> gpu;
};

bool operator==(const CpuTuningEntry& a, const CpuTuningEntry& b);
bool operator==(const GpuTuningEntry& a, const GpuTuningEntry& b);
bool operator==(const TuningTable& a, const TuningTable& b);

// Throws kInvalidArgument naming the line ("tuning table line 7: ...") for anything but the
// canonical text: a wrong header, unknown names, numbers that are not plain decimals or overflow
// 64 bits, min >= max, overlapping ranges of one collective, chunks out of bounds, impossible
// route/algorithm pairs, more than kTuningMaxEntries entries or kTuningMaxTextBytes bytes.
TuningTable parseTuningTable(const std::string& text);
// The canonical text: parseTuningTable(formatTuningTable(t)) == t for every parsed t.
std::string formatTuningTable(const TuningTable& table);

// The entry covering a CPU request (CpuRequest::bytes, per rank, the same on every rank),
// converted to the table's message convention for `worldSize` ranks; null when none. all_to_all
// requests carry no size (ranks' lengths differ), so only an entry covering every size
// ([0, inf)) applies to them; barrier's message is 0.
const CpuTuningEntry* findCpu(const TuningTable& table, Collective collective, size_t requestBytes,
                              int worldSize);
// GpuRequest::bytes is already a message in the table's convention.
const GpuTuningEntry* findGpu(const TuningTable& table, GpuCollective collective, size_t bytes);

// "" when `table` was measured on a group of `shape`'s size, hosts and locality, else why not
// ("table for world 4/1/one_host, group is 2/1/one_host").
std::string tuningMismatch(const TuningTable& table, const GroupShape& shape);

const char* localityName(Locality locality);

}  // namespace xccl::algo
