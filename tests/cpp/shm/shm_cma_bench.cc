// The single-copy path (process_vm_readv, docs/shm.md) against the slots, per collective, across
// fork()ed processes, fp32 SUM, the two alternating inside each repetition so load from other
// processes hits both alike (algo::ShmCmaMinBytes's defaults rest on python -m xccl.bench runs
// instead, docs/shm.md). On a shared machine compare ratios, not times.
//
//   shm_cma_bench [ranks=2] [repetitions=9] [min bytes=64 KiB] [max bytes=64 MiB] [step=2]
//                 [huge=0]
//
// huge=1 backs the buffers with transparent huge pages (madvise), as torch does for large CPU
// tensors under THP_MEM_ALLOC_ENABLE=1: process_vm_readv then pins 512 times fewer pages.
// First rank 0 times one core copying 64 MiB: process_vm_readv from rank 1's buffer and memcpy
// from its own. Then, per collective and size, rank 0's median time per call of each path (a burst
// of back-to-back calls / burst length) and the median of the per-repetition ratios single/slots.
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "shm/shm_testing.h"

namespace xccl {
namespace {

using Clock = std::chrono::steady_clock;

using testing::medianOf;

int burstFor(size_t bytes) {
  const size_t burst = (size_t{16} << 20) / std::max<size_t>(bytes, 1);
  return static_cast<int>(std::clamp<size_t>(burst, 3, 200));
}

struct Sweep {
  int repetitions;
  size_t minBytes, maxBytes, step;
  bool huge;
};

// `count` floats of value `value`, in an anonymous mapping (huge pages when asked).
struct Buffer {
  Buffer(size_t count, float value, bool huge) : bytes(std::max<size_t>(count * 4, 4096)) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (huge) ::madvise(p, bytes, MADV_HUGEPAGE);
    data = static_cast<float*>(p);
    std::fill(data, data + count, value);
  }
  ~Buffer() { ::munmap(data, bytes); }
  size_t bytes;
  float* data;
};

constexpr const char* kNames[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                  "reduce"};

int runRank(int rank, int ranks, const std::string& dir, const Sweep& sweep) {
  testing::FileStore store(dir);
  std::string why;
  auto segment = net::shm::Segment::create(store, rank, ranks, net::shm::Options(), &why);
  if (!segment || !segment->cma()) {
    std::fprintf(stderr, "unavailable: %s %s\n", why.c_str(),
                 segment ? segment->cmaUnavailable().c_str() : "");
    return 1;
  }
  testing::ShmCalls calls(*segment);
  {
    constexpr size_t kCopy = size_t{64} << 20;
    Buffer source(kCopy / 4, 1.0f, sweep.huge), target(kCopy / 4, 0, sweep.huge);
    if (rank == 1) store.set("copy", net::toBytes(std::to_string(uintptr_t(source.data))));
    if (rank == 0) {
      const uint64_t remote =
          std::stoull(net::toString(store.get("copy", std::chrono::minutes(1))));
      double best[2] = {1e9, 1e9};
      for (int rep = 0; rep < 5; ++rep) {
        for (int kind = 0; kind < 2; ++kind) {
          const auto start = Clock::now();
          if (kind == 0) segment->cma()->read("copy", 1, remote, target.data, kCopy);
          if (kind == 1) std::memcpy(target.data, source.data, kCopy);
          const double s = std::chrono::duration<double>(Clock::now() - start).count();
          best[kind] = std::min(best[kind], s);
        }
      }
      std::printf("# one core, 64 MiB: process_vm_readv %.2f GB/s, memcpy %.2f GB/s (best of 5)\n",
                  kCopy / best[0] / 1e9, kCopy / best[1] / 1e9);
    }
    algo::shm::barrier(calls.next("barrier"));
  }
  if (rank == 0) {
    std::printf("# %d ranks, slot %zu bytes, huge pages %d\n%-15s %10s %12s %12s %8s\n", ranks,
                segment->slotBytes(), sweep.huge, "collective", "bytes", "slots us", "single us",
                "ratio");
  }
  for (int op : {0, 1, 3, 4}) {  // reduce_scatter has no single-copy variant
    for (size_t bytes = sweep.minBytes; bytes <= sweep.maxBytes; bytes *= sweep.step) {
      const size_t count = bytes / sizeof(float);
      Buffer dataBuffer(count, 1.0f + rank, sweep.huge), outBuffer(count, 0, sweep.huge);
      float* data = dataBuffer.data;
      float* out = outBuffer.data;
      const size_t part = count / ranks;
      const std::vector<size_t> parts(ranks, part * sizeof(float));
      auto once = [&]() {
        switch (op) {
          case 0:
            return algo::shm::allReduce(calls.next("allreduce"), data, count, DataType::kFloat32,
                                        ReduceOp::kSum);
          case 1: return algo::shm::allGather(calls.next("allgather"), data, out, parts);
          case 2:
            return algo::shm::reduceScatter(calls.next("reducescatter"), data, out, part,
                                            DataType::kFloat32, ReduceOp::kSum);
          case 3: return algo::shm::broadcast(calls.next("broadcast"), data, bytes, 0);
          default:
            return algo::shm::reduce(calls.next("reduce"), data, count, DataType::kFloat32,
                                     ReduceOp::kSum, 0);
        }
      };
      const int burst = burstFor(bytes);
      std::vector<double> us[2], ratio;
      for (int rep = -1; rep < sweep.repetitions; ++rep) {
        double t[2];
        for (int single = 0; single < 2; ++single) {
          calls.tunables().shmCmaMinBytes.setAll(single ? 0 : SIZE_MAX);
          algo::shm::barrier(calls.next("barrier"));
          const auto start = Clock::now();
          for (int i = 0; i < burst; ++i) once();
          t[single] =
              std::chrono::duration<double, std::micro>(Clock::now() - start).count() / burst;
        }
        if (rep < 0) continue;
        us[0].push_back(t[0]);
        us[1].push_back(t[1]);
        ratio.push_back(t[1] / t[0]);
      }
      if (rank == 0) {
        std::printf("%-15s %10zu %12.1f %12.1f %8.2f\n", kNames[op], bytes, medianOf(us[0]),
                    medianOf(us[1]), medianOf(ratio));
        std::fflush(stdout);
      }
    }
  }
  algo::shm::barrier(calls.next("barrier"));
  return 0;
}

}  // namespace
}  // namespace xccl

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 2;
  xccl::Sweep sweep;
  sweep.repetitions = argc > 2 ? std::atoi(argv[2]) : 9;
  sweep.minBytes = argc > 3 ? std::strtoull(argv[3], nullptr, 0) : (size_t{64} << 10);
  sweep.maxBytes = argc > 4 ? std::strtoull(argv[4], nullptr, 0) : (size_t{64} << 20);
  sweep.step = argc > 5 ? std::strtoull(argv[5], nullptr, 0) : 2;
  sweep.huge = argc > 6 && std::atoi(argv[6]) != 0;
  if (ranks < 2 || sweep.minBytes < 1024 || sweep.step < 2 || sweep.repetitions < 1) return 2;
  return xccl::testing::forkRanks(ranks, "xccl-cma-bench", [&](int rank, const std::string& dir) {
    return xccl::runRank(rank, ranks, dir, sweep);
  });
}
