// all_reduce timings across fork()ed processes on one host: shm one-shot, shm two-shot, and the
// TCP algorithms (algo/collectives.h over loopback), fp32 SUM, in the same run. Used to choose
// algo::kShmTwoShotMinBytes (docs/shm.md). On a shared machine compare ratios, not times.
//
//   shm_bench [ranks=4] [repetitions=7] [max bytes=16 MiB] [tcp=1] [min bytes=1024] [step=4]
//
// Sizes run from min to max bytes, multiplied by `step` each time.
//
// Each time is the median over `repetitions` of (time of a burst of back-to-back all_reduces /
// burst length) on rank 0, after a barrier and a warm-up burst; each ratio is the median of the
// per-repetition ratios (the variants alternate inside a repetition).

#include <algorithm>
#include <cstdio>

#include "algo/collectives.h"
#include "algo/reduce.h"
#include "net/transport/tcp/transport.h"
#include "shm/shm_testing.h"

namespace xccl {
namespace {

using Clock = std::chrono::steady_clock;

using testing::medianOf;

// Back-to-back operations per timed burst: enough to amortise the clock, bounded for big sizes.
int burstFor(size_t bytes) {
  const size_t burst = (size_t{8} << 20) / std::max<size_t>(bytes, 1);
  return static_cast<int>(std::clamp<size_t>(burst, 4, 400));
}

struct Sweep {
  int repetitions;
  size_t minBytes, maxBytes, step;
  bool tcp;
};

int runRank(int rank, int ranks, const std::string& dir, const Sweep& sweep) {
  const bool tcp = sweep.tcp;
  const int repetitions = sweep.repetitions;
  testing::FileStore store(dir);
  std::string why;
  auto segment = net::shm::Segment::create(store, rank, ranks, net::shm::Options(), &why);
  if (!segment) {
    std::fprintf(stderr, "shared memory unavailable: %s\n", why.c_str());
    return 1;
  }
  std::unique_ptr<net::tcp::TcpTransport> transport;
  if (tcp) {
    net::tcp::TcpOptions options;
    options.storeHost = "127.0.0.1";
    transport = std::make_unique<net::tcp::TcpTransport>(store, rank, ranks, options);
  }
  uint64_t seq = 0;
  auto shmContext = [&](size_t twoShotMinBytes) {
    algo::Tunables tunables;
    tunables.shmTwoShotMinBytes = twoShotMinBytes;
    ++seq;
    return algo::shm::Context{*segment,
                              seq,
                              "allreduce #" + std::to_string(seq),
                              net::Clock::now() + std::chrono::minutes(2),
                              tunables,
                              nullptr};
  };
  if (rank == 0) {
    std::printf("# %d ranks, slot %zu bytes, reductions: %s\n", ranks, segment->slotBytes(),
                algo::isaName(algo::bestIsa()));
    std::printf("%10s %12s %12s %12s %10s %10s\n", "bytes", "one-shot us", "two-shot us",
                tcp ? "tcp us" : "-", "2shot/1shot", "tcp/best");
  }
  for (size_t bytes = sweep.minBytes; bytes <= sweep.maxBytes; bytes *= sweep.step) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((i * 7 + rank) % 13) * 0.25f;
    const int burst = burstFor(bytes);
    const int variants = tcp ? 3 : 2;
    auto once = [&](int variant) {
      if (variant == 2) {
        algo::Context ctx{*transport, ++seq, "tcp allreduce",
                          net::Clock::now() + std::chrono::minutes(2), algo::Tunables()};
        algo::allReduce(ctx, data.data(), count, DataType::kFloat32, ReduceOp::kSum);
      } else {
        algo::shm::allReduce(shmContext(variant == 0 ? SIZE_MAX : 0), data.data(), count,
                             DataType::kFloat32, ReduceOp::kSum);
      }
    };
    // The variants alternate within each repetition, so load from other processes hits them
    // alike; ratios are taken per repetition, then the median.
    std::vector<double> perOp[3], twoVsOne, tcpVsBest;
    for (int rep = -1; rep < repetitions; ++rep) {  // rep -1: warm-up
      double us[3] = {0, 0, 0};
      for (int variant = 0; variant < variants; ++variant) {
        algo::shm::barrier(shmContext(0));
        const auto start = Clock::now();
        for (int i = 0; i < burst; ++i) once(variant);
        const auto elapsed = Clock::now() - start;
        us[variant] = std::chrono::duration<double, std::micro>(elapsed).count() / burst;
      }
      if (rep < 0) continue;
      for (int variant = 0; variant < variants; ++variant) perOp[variant].push_back(us[variant]);
      twoVsOne.push_back(us[1] / us[0]);
      if (tcp) tcpVsBest.push_back(us[2] / std::min(us[0], us[1]));
    }
    double results[3] = {medianOf(perOp[0]), medianOf(perOp[1]), tcp ? medianOf(perOp[2]) : 0.0};
    if (rank == 0) {
      std::printf("%10zu %12.1f %12.1f %12.1f %10.2f %10.2f\n", bytes, results[0], results[1],
                  results[2], medianOf(twoVsOne), tcp ? medianOf(tcpVsBest) : 0.0);
      std::fflush(stdout);
    }
  }
  algo::shm::barrier(shmContext(0));
  return 0;
}

}  // namespace
}  // namespace xccl

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 4;
  xccl::Sweep sweep;
  sweep.repetitions = argc > 2 ? std::atoi(argv[2]) : 7;
  sweep.maxBytes = argc > 3 ? std::strtoull(argv[3], nullptr, 0) : (size_t{16} << 20);
  sweep.tcp = argc > 4 ? std::atoi(argv[4]) != 0 : true;
  sweep.minBytes = argc > 5 ? std::strtoull(argv[5], nullptr, 0) : 1024;
  sweep.step = argc > 6 ? std::strtoull(argv[6], nullptr, 0) : 4;
  if (sweep.minBytes < 4 || sweep.step < 2 || sweep.repetitions < 1) return 2;
  return xccl::testing::forkRanks(ranks, "xccl-shm-bench", [&](int rank, const std::string& dir) {
    return xccl::runRank(rank, ranks, dir, sweep);
  });
}
