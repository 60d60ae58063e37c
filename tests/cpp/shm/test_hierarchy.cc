// Groups spanning hosts (simulated on one machine with Options::hostIdentity), ranks as threads
// with real TCP: net::Hierarchy builds a segment per host with several ranks and the leaders'
// subset of the TCP mesh, and all_reduce through algo::Runner runs reduce-in-host, TCP among
// leaders, broadcast-in-host, with exact results on every rank (the other collectives:
// test_hierarchical.cc); groups that cannot use it say
// why on every rank alike, and a leader that fails stops its own host and the others promptly.
#include <gtest/gtest.h>

#include <memory>

#include "algo/runner.h"
#include "algo_testing.h"
#include "shm_testing.h"

namespace xccl {
namespace {

using namespace std::chrono_literals;

constexpr size_t kSlot = 4096;  // small: large messages pipeline through many steps

net::shm::Options hostOptions(const std::string& host) {
  net::shm::Options options = testing::shmOptions(kSlot, 30s);
  options.hostIdentity = host;
  options.storePrefix = "hosts";
  return options;
}

algo::Runner runnerOver(net::Transport& tcp, const net::Hierarchy* h, uint64_t seq,
                        std::chrono::milliseconds timeout = 30s) {
  algo::Context ctx{tcp, seq, "allreduce #" + std::to_string(seq), net::Clock::now() + timeout,
                    algo::Tunables{}};
  const algo::GroupShape shape{tcp.size(), algo::Locality::kPerHost, h->hosts(),
                               static_cast<int>(h->local().size())};
  return {ctx, nullptr, testing::aliveFrom(tcp), h, nullptr, shape};
}

// Which simulated host each rank is on.
using Layout = std::vector<std::string>;

class HierarchyLayouts : public ::testing::TestWithParam<Layout> {};

TEST_P(HierarchyLayouts, AllReduceIsExactOnEveryRank) {
  const Layout& hosts = GetParam();
  const int world = static_cast<int>(hosts.size());
  testing::runTcpRanks(world, [&](int rank, net::Store& store,
                                  std::unique_ptr<net::tcp::TcpTransport>& tcp) {
    std::string why;
    auto h = net::Hierarchy::create(store, *tcp, hostOptions(hosts[rank]), &why);
    ASSERT_TRUE(h) << why;
    // This host's ranks, ascending; the first leads; a segment only with company.
    std::vector<int> local;
    for (int r = 0; r < world; ++r) {
      if (hosts[r] == hosts[rank]) local.push_back(r);
    }
    EXPECT_EQ(h->local(), local);
    EXPECT_EQ(h->segment() != nullptr, local.size() > 1);
    EXPECT_EQ(h->leaders() != nullptr, local.front() == rank);
    uint64_t seq = 0;
    for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{20000}}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
        std::vector<int32_t> data(count);
        for (size_t i = 0; i < count; ++i) data[i] = static_cast<int32_t>(i % 97 + 10 * rank);
        const uint32_t stepsBefore = h->segment() ? h->segment()->step() : 0;
        algo::allReduce(runnerOver(*tcp, h.get(), ++seq), data.data(), count, DataType::kInt32, op);
        for (size_t i = 0; i < count; ++i) {
          const int64_t base = static_cast<int64_t>(i % 97);
          const int64_t sum = world * base + 10 * world * (world - 1) / 2;
          const int64_t want = op == ReduceOp::kSum   ? sum
                               : op == ReduceOp::kMax ? base + 10 * (world - 1)
                                                      : sum / world;  // truncates like C++
          ASSERT_EQ(data[i], want) << "rank " << rank << " " << reduceOpName(op) << " count "
                                   << count << " element " << i;
        }
        if (h->segment() && count > 0) {
          EXPECT_NE(h->segment()->step(), stepsBefore) << "the host's segment was not used";
        }
      }
    }
    // The other collectives of a hierarchical group use the segment too (their results:
    // test_hierarchical.cc).
    const uint32_t stepsBefore = h->segment() ? h->segment()->step() : 0;
    std::vector<uint8_t> bytes(64, static_cast<uint8_t>(rank)), all(64 * world);
    algo::allGather(runnerOver(*tcp, h.get(), ++seq), bytes.data(), all.data(),
                    std::vector<size_t>(world, 64));
    for (int r = 0; r < world; ++r) EXPECT_EQ(all[64 * r], r);
    if (h->segment()) {
      EXPECT_NE(h->segment()->step(), stepsBefore);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Hosts, HierarchyLayouts,
                         ::testing::Values(Layout{"a", "b", "a", "b"},        // interleaved
                                           Layout{"a", "a", "a", "b"},        // a lone rank
                                           Layout{"x", "y", "y", "z", "z"}),  // three hosts
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           std::string name;
                           for (const auto& host : info.param) name += host;
                           return name;
                         });

// Every rank gets nullptr with the same reason.
void expectNoHierarchy(const Layout& hosts, int disabledRank, const std::string& fragment) {
  const int world = static_cast<int>(hosts.size());
  testing::runTcpRanks(world, [&](int rank, net::Store& store,
                                  std::unique_ptr<net::tcp::TcpTransport>& tcp) {
    net::shm::Options options = hostOptions(hosts[rank]);
    options.disabled = rank == disabledRank;
    std::string why;
    EXPECT_FALSE(net::Hierarchy::create(store, *tcp, options, &why)) << "rank " << rank;
    EXPECT_NE(why.find(fragment), std::string::npos) << "rank " << rank << ": " << why;
  });
}

TEST(Hierarchy, OnlyForSeveralHostsWithCompany) {
  expectNoHierarchy({"a", "a", "a"}, -1, "one host");
  expectNoHierarchy({"a", "b", "c"}, -1, "every host has one rank");
  expectNoHierarchy({"a", "a", "b", "b"}, 2, "XCCL_SHM_DISABLE is set on rank 2");
}

// Host b's leader (rank 2) aborts instead of joining: its host-mate waits for it in shared
// memory, the other leader for it over TCP, and that leader's host-mate for its own leader.
// Each survivor that fails aborts its transport, as the backend does, so all of them stop long
// before their deadline with a message that leads to rank 2. The same for the hierarchical
// all_gather, and a broadcast rooted at rank 2 (algo/hierarchical.h): nobody can finish either.
TEST(Hierarchy, AFailingLeaderStopsEveryHostPromptly) {
  const Layout hosts{"a", "a", "b", "b"};
  for (const char* collective : {"all_reduce", "all_gather", "broadcast"}) {
    testing::runTcpRanks(4, [&](int rank, net::Store& store,
                                std::unique_ptr<net::tcp::TcpTransport>& tcp) {
      std::string why;
      auto h = net::Hierarchy::create(store, *tcp, hostOptions(hosts[rank]), &why);
      ASSERT_TRUE(h) << why;
      if (rank == 2) {
        std::this_thread::sleep_for(100ms);
        tcp->abort("injected fault on rank 2");
        return;
      }
      std::vector<float> data(5000, 1.0f), all(4 * data.size());
      const std::string name = collective;
      const auto start = net::Clock::now();
      auto error = testing::errorFrom([&] {
        try {
          const algo::Runner runner = runnerOver(*tcp, h.get(), 1);
          if (name == "all_reduce") {
            algo::allReduce(runner, data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
          } else if (name == "all_gather") {
            algo::allGather(runner, data.data(), all.data(), std::vector<size_t>(4, 20000));
          } else {
            algo::broadcast(runner, data.data(), 20000, 2);
          }
        } catch (const Error& e) {
          tcp->abort(e.what());
          throw;
        }
      });
      ASSERT_TRUE(error.has_value()) << name << " rank " << rank;
      EXPECT_LT(net::Clock::now() - start, 5s) << error->what();
      EXPECT_NE(std::string(error->what()).find("rank 2"), std::string::npos)
          << name << " rank " << rank << ": " << error->what();
    });
  }
}

}  // namespace
}  // namespace xccl
