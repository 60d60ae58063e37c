// Throughput of the host reductions (algo/reduce.h) per instruction set: reduceInto (dst op= src)
// and reduceMany of 4 sources, fp32/fp64/fp16/bf16, SUM and MAX, on page-aligned buffers. The
// numbers behind docs/shm.md's "Vector reductions"; compare ISAs within one run (the times of a
// shared machine move between runs).
//
//   reduce_bench [elements=1048576] [repetitions=15]
//
// Each time is the best of `repetitions` runs, in milliseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "algo/reduce.h"

namespace xccl {
namespace {

using Clock = std::chrono::steady_clock;
using algo::Isa;

struct PageFree {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, PageFree>;

// Page-aligned, 1.0 and 2.0 alternating in `type`: no operation meets NaNs or overflows.
Buffer filledBuffer(DataType type, size_t count, int salt) {
  const size_t bytes = count * elementSize(type);
  Buffer buffer(static_cast<uint8_t*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096)));
  for (size_t i = 0; i < count; ++i) {
    const float v = 1.0f + static_cast<float>((i + salt) % 2);
    uint8_t* p = buffer.get() + i * elementSize(type);
    if (type == DataType::kFloat32) std::memcpy(p, &v, sizeof v);
    if (type == DataType::kFloat64) {
      const double d = v;
      std::memcpy(p, &d, sizeof d);
    }
    const uint16_t h = type == DataType::kFloat16 ? algo::floatToHalf(v) : algo::floatToBfloat16(v);
    if (elementSize(type) == 2) std::memcpy(p, &h, sizeof h);
  }
  return buffer;
}

template <typename Run>
double bestMs(int repetitions, Run run) {
  double best = 1e30;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = Clock::now();
    run();
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return best;
}

}  // namespace
}  // namespace xccl

int main(int argc, char** argv) {
  using namespace xccl;
  const size_t count = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{1} << 20;
  const int repetitions = argc > 2 ? std::atoi(argv[2]) : 15;
  std::printf("%-10s %-4s %-8s %10s %10s\n", "dtype", "op", "isa", "into_ms", "many4_ms");
  for (DataType type :
       {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
      for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
        if (!algo::isaAvailable(isa)) continue;
        std::vector<Buffer> sources;
        for (int s = 0; s < 4; ++s) sources.push_back(filledBuffer(type, count, s));
        Buffer dst = filledBuffer(type, count, 0);
        const void* srcs[4] = {sources[0].get(), sources[1].get(), sources[2].get(),
                               sources[3].get()};
        const double into = bestMs(repetitions, [&] {
          algo::reduceInto(isa, type, op, dst.get(), srcs[1], count);
        });
        const double many = bestMs(repetitions, [&] {
          algo::reduceMany(isa, type, op, dst.get(), srcs, 4, count);
        });
        std::printf("%-10s %-4s %-8s %10.3f %10.3f\n", dataTypeName(type), reduceOpName(op),
                    algo::isaName(isa), into, many);
      }
    }
  }
  return 0;
}
