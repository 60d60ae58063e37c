// xccl_kernel_bench: times the collective kernels with virtual ranks (N streams on one GPU) and
// compares the HBM traffic they cause with the GPU's measured device-to-device copy rate.
//
// On one GPU every "peer" load is a local HBM/L2 load, so these numbers are the kernels' own
// efficiency (vectorisation, grid, flag round trips through L2) and launch overheads, never
// NVLink/xGMI collective performance (docs/algorithms.md, "What a single GPU can and cannot
// tell").
//
//   xccl_kernel_bench [--quick] [--worlds 2,4,8] [--max-bytes N] [--csv FILE]
//
// Method (nccl-tests): random bf16 inputs, warm-up, then >= 10 timed iterations (until
// ~30 ms or 200 iterations), cudaEvent timing per iteration on the fork-join stream, median and
// p10/p90. Sizes follow nccl-tests: S is the per-rank message for all-reduce and broadcast, the
// per-rank output for all-gather and the per-rank input for reduce-scatter and all-to-all.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "gpu/reference.h"
#include "gpu/virtual_ranks.h"
#include "kernels/launch.h"

namespace xccl::testing {
namespace {

using Launch = std::function<void(int rank, gpuStream_t stream)>;

struct Stats {
  double p10, p50, p90;  // microseconds
};

Stats summarise(std::vector<float> ms) {
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) { return 1000.0 * ms[static_cast<size_t>(q * (ms.size() - 1))]; };
  return Stats{at(0.1), at(0.5), at(0.9)};
}

// Times `enqueue` (one collective on all ranks, or one graph replay) between events on stream 0.
Stats timeIt(VirtualRanks& vr, const std::function<void()>& enqueue, int warmup = 5) {
  for (int i = 0; i < warmup; ++i) enqueue();
  gpuEvent_t start, stop;
  gpuCheck(XCCL_RT(EventCreate)(&start), "EventCreate");
  gpuCheck(XCCL_RT(EventCreate)(&stop), "EventCreate");
  std::vector<float> samples;
  float total = 0;
  while (samples.size() < 10 || (total < 30.0f && samples.size() < 200)) {
    gpuCheck(XCCL_RT(EventRecord)(start, vr.stream(0)), "EventRecord");
    enqueue();
    gpuCheck(XCCL_RT(EventRecord)(stop, vr.stream(0)), "EventRecord");
    gpuCheck(XCCL_RT(EventSynchronize)(stop), "EventSynchronize");
    float ms = 0;
    gpuCheck(XCCL_RT(EventElapsedTime)(&ms, start, stop), "EventElapsedTime");
    samples.push_back(ms);
    total += ms;
  }
  (void)XCCL_RT(EventDestroy)(start);
  (void)XCCL_RT(EventDestroy)(stop);
  const std::string errors = vr.describeErrors();
  XCCL_CHECK(errors.empty(), "device error during timing: ", errors);
  return summarise(samples);
}

// Device-to-device copy of `bytes`: the roofline, counting bytes read plus bytes written.
double measureCopyRoofline(size_t bytes) {
  DeviceBuffer a(bytes), b(bytes);
  gpuCheck(XCCL_RT(Memset)(a.get(), 1, bytes), "Memset");
  std::vector<float> ms;
  gpuEvent_t start, stop;
  gpuCheck(XCCL_RT(EventCreate)(&start), "EventCreate");
  gpuCheck(XCCL_RT(EventCreate)(&stop), "EventCreate");
  for (int i = 0; i < 13; ++i) {
    gpuCheck(XCCL_RT(EventRecord)(start), "EventRecord");
    gpuCheck(XCCL_RT(MemcpyAsync)(b.get(), a.get(), bytes, XCCL_RT(MemcpyDeviceToDevice)),
             "MemcpyAsync");
    gpuCheck(XCCL_RT(EventRecord)(stop), "EventRecord");
    gpuCheck(XCCL_RT(EventSynchronize)(stop), "EventSynchronize");
    float t = 0;
    gpuCheck(XCCL_RT(EventElapsedTime)(&t, start, stop), "EventElapsedTime");
    if (i >= 3) ms.push_back(t);
  }
  (void)XCCL_RT(EventDestroy)(start);
  (void)XCCL_RT(EventDestroy)(stop);
  return 2.0 * bytes / (summarise(ms).p50 * 1e-6);
}

struct Collective {
  const char* name;
  // HBM bytes all W ranks together read + write for a per-rank message of S bytes.
  double (*hbmBytes)(double S, int W);
};

const Collective kCollectives[] = {
    {"allreduce_1shot", [](double S, int W) { return W * (W + 1) * S; }},
    {"allreduce_2shot", [](double S, int W) { return 3 * W * S + S; }},
    {"reduce_scatter", [](double S, int W) { return W * S + S; }},
    {"all_gather", [](double S, int W) { return 2 * W * S; }},
    {"broadcast", [](double S, int W) { return 2 * W * S; }},
    {"all_to_all", [](double S, int W) { return 2 * W * S; }},
};

// nccl-tests' bus bandwidth factors: busbw = algbw * factor.
double busFactor(const std::string& name, int w) {
  if (name.rfind("allreduce", 0) == 0) return 2.0 * (w - 1) / w;
  if (name == "broadcast") return 1.0;
  return static_cast<double>(w - 1) / w;
}

// The launch of collective `c` for a per-rank message of `bytes` (bf16), or nullptr when the size
// does not split into whole elements per rank.
Launch makeLaunch(VirtualRanks& vr, const std::string& c, size_t bytes) {
  const int w = vr.world();
  const size_t elements = bytes / 2;
  const kernels::LaunchShape shape = vr.shape();
  const DataType bf16 = DataType::kBFloat16;
  if (c == "allreduce_1shot" || c == "allreduce_2shot") {
    if (elements == 0) return nullptr;
    const auto algorithm =
        c == "allreduce_1shot" ? kernels::Algorithm::kOneShot : kernels::Algorithm::kTwoShot;
    return [&vr, elements, algorithm, shape, bf16](int r, gpuStream_t s) {
      auto a = vr.args<kernels::AllReduceArgs>(r, elements, bf16, shape);
      a.algorithm = algorithm;
      kernels::launchAllReduce(a, s);
    };
  }
  if (c == "broadcast") {
    if (elements == 0) return nullptr;
    return [&vr, elements, shape, bf16](int r, gpuStream_t s) {
      kernels::launchBroadcast({vr.handle(r), vr.output(r), elements, bf16, 0, shape}, s);
    };
  }
  const size_t perRank = elements / w;
  if (perRank == 0 || perRank * w != elements) return nullptr;
  if (c == "reduce_scatter") {
    return [&vr, perRank, shape, bf16](int r, gpuStream_t s) {
      kernels::launchReduceScatter(vr.args<kernels::ReduceScatterArgs>(r, perRank, bf16, shape), s);
    };
  }
  if (c == "all_gather") {
    return [&vr, perRank, shape, bf16](int r, gpuStream_t s) {
      kernels::launchAllGather({vr.handle(r), vr.output(r), perRank, bf16, shape}, s);
    };
  }
  return [&vr, perRank, shape, bf16](int r, gpuStream_t s) {
    kernels::launchAllToAll({vr.handle(r), vr.output(r), perRank, bf16, shape}, s);
  };
}

// Fills every rank's buffer with random bf16 values in [-4, 4): one random MiB, then doubled.
void fillRandom(VirtualRanks& vr, size_t bytes) {
  const size_t pattern = std::min<size_t>(bytes, 1 << 20);
  for (int r = 0; r < vr.world(); ++r) {
    vr.upload(vr.buffer(r), randomElements(DataType::kBFloat16, pattern / 2, 77 + r));
    for (size_t done = pattern; done < bytes; done *= 2) {
      gpuCheck(XCCL_RT(Memcpy)(vr.buffer(r) + done, vr.buffer(r), std::min(done, bytes - done),
                               XCCL_RT(MemcpyDeviceToDevice)),
               "Memcpy(fill)");
    }
  }
}

std::string human(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%g %s", v, units[u]);
  return text;
}

int run(int argc, char** argv) {
  bool quick = false;
  std::vector<int> worlds = {2, 4, 8};
  size_t maxBytes = size_t{256} << 20;
  std::FILE* csv = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
      maxBytes = size_t{16} << 20;
    } else if (arg == "--worlds" && i + 1 < argc) {
      worlds.clear();
      for (char* p = std::strtok(argv[++i], ","); p; p = std::strtok(nullptr, ",")) {
        worlds.push_back(std::atoi(p));
      }
    } else if (arg == "--max-bytes" && i + 1 < argc) {
      maxBytes = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--csv" && i + 1 < argc) {
      csv = std::fopen(argv[++i], "w");
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--worlds 2,4,8] [--max-bytes N] [--csv FILE]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!gpuAvailable()) {
    std::fprintf(stderr, "xccl_kernel_bench: no GPU device\n");
    return 3;
  }
  gpuDeviceProp_t prop{};
  gpuCheck(XCCL_RT(GetDeviceProperties)(&prop, 0), "GetDeviceProperties");
  std::printf("device: %s, %d SMs, %.0f MiB L2\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize / 1048576.0);
  const double roofline = measureCopyRoofline(size_t{1} << 30);
  std::printf("HBM roofline (1 GiB device-to-device copy, read+write): %.0f GB/s\n\n",
              roofline / 1e9);
  if (csv)
    std::fprintf(csv, "collective,world,bytes,p10_us,p50_us,p90_us,algbw_GBps,busbw_GBps,"
                      "hbm_GBps,roofline_pct\n");

  std::printf("%-16s %5s %10s %10s %10s %10s %10s %10s %10s %7s\n", "collective", "world", "size",
              "p50_us", "p10_us", "p90_us", "algbw_GB/s", "busbw_GB/s", "hbm_GB/s", "%roof");
  for (int w : worlds) {
    VirtualRanks vr(w, maxBytes, maxBytes);
    vr.setTimeoutNs(5ull * 1000 * 1000 * 1000);
    fillRandom(vr, maxBytes);
    for (const Collective& c : kCollectives) {
      for (size_t bytes = 8; bytes <= maxBytes; bytes *= quick ? 64 : 8) {
        const Launch launch = makeLaunch(vr, c.name, bytes);
        if (!launch) continue;
        const Stats t = timeIt(vr, [&] { vr.forkJoin(launch); });
        const double algbw = bytes / (t.p50 * 1e-6);
        const double busbw = algbw * busFactor(c.name, w);
        const double hbm = c.hbmBytes(static_cast<double>(bytes), w) / (t.p50 * 1e-6);
        std::printf("%-16s %5d %10s %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %6.1f%%\n", c.name, w,
                    human(bytes).c_str(), t.p50, t.p10, t.p90, algbw / 1e9, busbw / 1e9, hbm / 1e9,
                    100 * hbm / roofline);
        if (csv)
          std::fprintf(csv, "%s,%d,%zu,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.1f\n", c.name, w, bytes,
                       t.p10, t.p50, t.p90, algbw / 1e9, busbw / 1e9, hbm / 1e9,
                       100 * hbm / roofline);
      }
      std::printf("\n");
    }
  }

  // Launch overhead: the same one-shot all-reduce eager (one launch per rank per op, plus the
  // fork-join events) and from one graph per rank holding 20 of them (one fork-join per replay).
  std::printf("\nlaunch overhead: one-shot all-reduce, bf16, eager vs CUDA graph (us per op)\n");
  std::printf("%5s %10s %12s %12s\n", "world", "size", "eager_p50", "graph_p50");
  constexpr int kOpsPerGraph = 20;
  for (int w : worlds) {
    VirtualRanks vr(w, 1 << 20, 1 << 20);
    fillRandom(vr, 1 << 20);
    for (size_t bytes : {size_t{8}, size_t{4096}, size_t{65536}, size_t{1} << 20}) {
      const Launch launch = makeLaunch(vr, "allreduce_1shot", bytes);
      const Stats eager = timeIt(vr, [&] { vr.forkJoin(launch); });
      vr.capture([&](int r, gpuStream_t s) {
        for (int i = 0; i < kOpsPerGraph; ++i) launch(r, s);
      });
      const Stats graph = timeIt(vr, [&] { vr.replay(); });
      std::printf("%5d %10s %12.2f %12.2f\n", w, human(bytes).c_str(), eager.p50,
                  graph.p50 / kOpsPerGraph);
    }
  }
  if (csv) std::fclose(csv);
  return 0;
}

}  // namespace
}  // namespace xccl::testing

int main(int argc, char** argv) {
  try {
    return xccl::testing::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xccl_kernel_bench: %s\n", e.what());
    return 1;
  }
}
