// The hierarchical collectives (algo/hierarchical.h) with hosts simulated on one machine
// (Options::hostIdentity), ranks as threads with real TCP: every collective gives exactly the
// expected bytes on every rank, by group rank, for hosts of different sizes and ranks not ordered
// by host, with messages that cross the pipelining chunk many times. A failing leader:
// test_hierarchy.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>

#include "algo/runner.h"
#include "algo_testing.h"
#include "shm_testing.h"

namespace xccl {
namespace {

using namespace std::chrono_literals;

constexpr size_t kSlot = 4096;
constexpr size_t kChunk = 1000;  // small and odd: parts split into several uneven chunks

using Layout = std::vector<std::string>;
constexpr int kLayouts = 5;

struct Ranks {
  int layout;  // index of the layout below
  int rank;
  int world;
  net::Transport& tcp;
  std::unique_ptr<net::Hierarchy> h;
  uint64_t seq = 0;

  algo::Runner next() {
    algo::Tunables t;
    t.ringChunkBytes = kChunk;
    ++seq;
    algo::Context ctx{tcp, seq, "collective #" + std::to_string(seq), net::Clock::now() + 30s, t};
    const algo::GroupShape shape{world, algo::Locality::kPerHost, h->hosts(),
                                 static_cast<int>(h->local().size())};
    return {ctx, nullptr, testing::aliveFrom(tcp), h.get(), nullptr, shape};
  }
};

// Rank r's value at element i (small, so int32 sums and float sums are exact).
int32_t valueOf(int r, size_t i) { return static_cast<int32_t>((r * 131 + i * 7) % 251) - 100; }
uint8_t byteOf(int r, size_t i) { return static_cast<uint8_t>(r * 37 + i * 11 + 1); }

void forEachLayout(const std::function<void(Ranks&)>& body) {
  // Hosts of equal size (all_reduce's slices between hosts) and not (its leaders' fallback).
  const Layout layouts[] = {{"a", "b", "a", "b"},
                            {"a", "a", "b"},
                            {"a", "b", "a"},
                            {"x", "y", "y", "z", "z"},
                            {"a", "b", "c", "c", "b", "a"}};
  for (int layout = 0; layout < kLayouts; ++layout) {
    const Layout& hosts = layouts[layout];
    const int world = static_cast<int>(hosts.size());
    testing::runTcpRanks(world, [&](int rank, net::Store& store,
                                    std::unique_ptr<net::tcp::TcpTransport>& tcp) {
      net::shm::Options options = testing::shmOptions(kSlot, 30s);
      options.hostIdentity = hosts[rank];
      options.storePrefix = "hosts";
      std::string why;
      Ranks ranks{layout, rank, world, *tcp, net::Hierarchy::create(store, *tcp, options, &why)};
      ASSERT_TRUE(ranks.h) << why;
      ASSERT_EQ(ranks.next().plan(algo::Collective::kGather, 1).route,
                algo::CpuRoute::kHierarchical);
      SCOPED_TRACE("hosts " + std::accumulate(hosts.begin(), hosts.end(), std::string()));
      body(ranks);
    });
  }
}

TEST(Hierarchical, BroadcastGatherScatterFromEveryRoot) {
  forEachLayout([](Ranks& g) {
    const int n = g.world;
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{2500}}) {
      for (int root = 0; root < n; ++root) {
        std::vector<uint8_t> data(bytes);
        for (size_t i = 0; i < bytes; ++i) data[i] = g.rank == root ? byteOf(root, i) : 0;
        algo::broadcast(g.next(), data.data(), bytes, root);
        for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(data[i], byteOf(root, i)) << root << " " << i;

        std::vector<uint8_t> mine(bytes), all(bytes * n, 0);
        for (size_t i = 0; i < bytes; ++i) mine[i] = byteOf(g.rank, i);
        algo::gather(g.next(), mine.data(), bytes, all.data(), root);
        for (int r = 0; g.rank == root && r < n; ++r) {
          for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(all[r * bytes + i], byteOf(r, i)) << r;
        }

        std::vector<uint8_t> blocks(bytes * n), got(bytes, 0);
        for (size_t i = 0; g.rank == root && i < blocks.size(); ++i) {
          blocks[i] = byteOf(static_cast<int>(i / bytes), i % bytes);
        }
        algo::scatter(g.next(), blocks.data(), got.data(), bytes, root);
        for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(got[i], byteOf(g.rank, i)) << root << " " << i;
      }
    }
  });
}

// Reductions on int32 (SUM, MAX, AVG truncating) and float32 (SUM of small integers: exact in
// any order).
TEST(Hierarchical, ReduceAndReduceScatterAreExact) {
  forEachLayout([](Ranks& g) {
    const int n = g.world;
    for (size_t count : {size_t{1}, size_t{777}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
        const auto want = [&](size_t i) {
          int64_t sum = 0, max = INT64_MIN;
          for (int r = 0; r < n; ++r)
            sum += valueOf(r, i), max = std::max<int64_t>(max, valueOf(r, i));
          return op == ReduceOp::kSum ? sum : op == ReduceOp::kMax ? max : sum / n;
        };
        for (int root : {0, n - 1}) {
          std::vector<int32_t> data(count);
          for (size_t i = 0; i < count; ++i) data[i] = valueOf(g.rank, i);
          algo::reduce(g.next(), data.data(), count, DataType::kInt32, op, root);
          for (size_t i = 0; g.rank == root && i < count; ++i) {
            ASSERT_EQ(data[i], want(i)) << reduceOpName(op) << " root " << root << " " << i;
          }
        }
        // Block b of rank r holds values of element b * count + i.
        std::vector<int32_t> input(count * n), output(count);
        for (size_t i = 0; i < input.size(); ++i) input[i] = valueOf(g.rank, i);
        algo::reduceScatter(g.next(), input.data(), output.data(), count, DataType::kInt32, op);
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(output[i], want(g.rank * count + i)) << reduceOpName(op) << " " << i;
        }
      }
      std::vector<float> input(count * n), output(count);
      for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(valueOf(g.rank, i));
      algo::reduceScatter(g.next(), input.data(), output.data(), count, DataType::kFloat32,
                          ReduceOp::kSum);
      for (size_t i = 0; i < count; ++i) {
        float sum = 0;
        for (int r = 0; r < n; ++r) sum += static_cast<float>(valueOf(r, g.rank * count + i));
        ASSERT_EQ(output[i], sum) << i;
      }
    }
  });
}

// all_reduce on int32 (exact for every op) with counts below one round, of more rounds than its
// window of slots and with a short last round (kChunk / 4 elements per rank and round), and on
// float32, whose sums round: every rank must hold the same bytes whatever its host.
TEST(Hierarchical, AllReduceIsExactAndTheSameOnEveryRank) {
  forEachLayout([](Ranks& g) {
    const int n = g.world;
    for (size_t count : {size_t{1}, size_t{5}, size_t{250}, size_t{4777}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}) {
        std::vector<int32_t> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = valueOf(g.rank, i);
        algo::allReduce(g.next(), data.data(), count, DataType::kInt32, op);
        for (size_t i = 0; i < count; ++i) {
          int64_t sum = 0, max = INT64_MIN, min = INT64_MAX;
          for (int r = 0; r < n; ++r) {
            sum += valueOf(r, i);
            max = std::max<int64_t>(max, valueOf(r, i));
            min = std::min<int64_t>(min, valueOf(r, i));
          }
          const int64_t want = op == ReduceOp::kSum   ? sum
                               : op == ReduceOp::kMax ? max
                               : op == ReduceOp::kMin ? min
                                                      : sum / n;
          ASSERT_EQ(data[i], want) << reduceOpName(op) << " count " << count << " at " << i;
        }
      }
      // float32 of mixed magnitudes: the sum depends on the order of the additions, and must be
      // the same everywhere.
      const auto mixed = [](int r, size_t i) {
        return std::ldexp(1.0f + static_cast<float>((r * 977 + i * 13) % 1000) / 1000.0f,
                          static_cast<int>((r * 7 + i) % 21) - 10);
      };
      std::vector<float> sums(count);
      for (size_t i = 0; i < count; ++i) sums[i] = mixed(g.rank, i);
      algo::allReduce(g.next(), sums.data(), count, DataType::kFloat32, ReduceOp::kSum);
      std::vector<float> rank0(sums);
      algo::broadcast(g.next(), rank0.data(), count * sizeof(float), 0);
      ASSERT_EQ(0, std::memcmp(sums.data(), rank0.data(), count * sizeof(float)))
          << "count " << count;
      for (size_t i = 0; i < count; ++i) {
        double exact = 0;
        for (int r = 0; r < n; ++r) exact += mixed(r, i);
        ASSERT_NEAR(sums[i], exact, exact * 1e-6) << i;
      }
    }
  });
}

TEST(Hierarchical, AllGatherEvenAndUnevenAndAllToAll) {
  forEachLayout([](Ranks& g) {
    const int n = g.world;
    // Even parts; uneven ones with an empty part and parts spanning several chunks.
    std::vector<std::vector<size_t>> shapes{std::vector<size_t>(n, 1),
                                            std::vector<size_t>(n, 2100)};
    std::vector<size_t> uneven(n);
    for (int r = 0; r < n; ++r) uneven[r] = r == 1 ? 0 : 700 * r + 3;
    shapes.push_back(uneven);
    for (const std::vector<size_t>& parts : shapes) {
      std::vector<size_t> offset(n + 1, 0);
      std::partial_sum(parts.begin(), parts.end(), offset.begin() + 1);
      std::vector<uint8_t> mine(parts[g.rank]), all(offset[n], 0);
      for (size_t i = 0; i < mine.size(); ++i) mine[i] = byteOf(g.rank, i);
      algo::allGather(g.next(), mine.data(), all.data(), parts);
      for (int r = 0; r < n; ++r) {
        for (size_t i = 0; i < parts[r]; ++i) ASSERT_EQ(all[offset[r] + i], byteOf(r, i)) << r;
      }
    }
    // Rank s sends length(s, d) bytes to d; some pairs send nothing.
    const auto length = [](int s, int d) -> size_t { return (s * 3 + d * 5) % 4 * 900; };
    std::vector<size_t> so(n), sl(n), ro(n), rl(n);
    size_t sent = 0, received = 0;
    for (int p = 0; p < n; ++p) {
      so[p] = sent, sl[p] = length(g.rank, p), sent += sl[p];
      ro[p] = received, rl[p] = length(p, g.rank), received += rl[p];
    }
    std::vector<uint8_t> input(sent), output(received, 0);
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < sl[p]; ++i) input[so[p] + i] = byteOf(g.rank * 8 + p, i);
    }
    algo::allToAll(g.next(), input.data(), so, sl, output.data(), ro, rl);
    for (int p = 0; p < n; ++p) {
      for (size_t i = 0; i < rl[p]; ++i) ASSERT_EQ(output[ro[p] + i], byteOf(p * 8 + g.rank, i));
    }
  });
}

TEST(Hierarchical, BarrierWaitsForEveryRank) {
  std::atomic<int> arrived[kLayouts][3] = {};  // by layout and round
  forEachLayout([&](Ranks& g) {
    for (std::atomic<int>& round : arrived[g.layout]) {
      if (g.rank == 0) std::this_thread::sleep_for(20ms);  // the last to arrive
      ++round;
      algo::barrier(g.next());
      EXPECT_EQ(round.load(), g.world) << "left the barrier before everyone arrived";
    }
  });
}

}  // namespace
}  // namespace xccl
