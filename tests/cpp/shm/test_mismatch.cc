// Ranks that call different shm collectives at the same point (or the same one with other
// sizes, root or dtype) fail naming the difference instead of reading each other's slots as if
// they held what they expect; ranks that agree never see a false alarm (the long mixed sequence
// of test_exchange.cc runs the same checks on every step).
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shm_testing.h"

namespace xccl {
namespace {

using namespace std::chrono_literals;
using testing::ShmCalls;

constexpr size_t kSlot = 4096;

// Runs body(rank, calls) on `world` ranks with a short deadline and returns each rank's error.
std::vector<std::optional<Error>> errorsOf(int world,
                                           const std::function<void(int, ShmCalls&)>& body) {
  std::vector<std::optional<Error>> errors(world);
  testing::runShmRanks(world, kSlot, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment, {}, nullptr, 10s);
    try {
      body(rank, calls);
    } catch (const Error& e) {
      errors[rank] = e;
    }
  });
  return errors;
}

// Every rank failed with kPeerFailure; rank r's message contains fragments[r] (if any).
void expectAllFailed(const std::vector<std::optional<Error>>& errors,
                     const std::vector<std::string>& fragments) {
  for (size_t r = 0; r < errors.size(); ++r) {
    ASSERT_TRUE(errors[r].has_value()) << "rank " << r << " did not notice the mismatch";
    EXPECT_EQ(errors[r]->kind(), ErrorKind::kPeerFailure) << errors[r]->what();
    const std::string text = errors[r]->what();
    if (r < fragments.size()) {
      EXPECT_NE(text.find(fragments[r]), std::string::npos) << "rank " << r << ": " << text;
    }
  }
}

TEST(ShmMismatch, AllReduceAgainstAllGatherOfTheSameBytes) {
  for (int world : {2, 3}) {
    auto errors = errorsOf(world, [&](int rank, ShmCalls& calls) {
      std::vector<float> data(1001, 1.0f);
      if (rank == 0) {
        algo::shm::allReduce(calls.next("allreduce"), data.data(), data.size(), DataType::kFloat32,
                             ReduceOp::kSum);
      } else {
        std::vector<float> out(data.size() * world);
        algo::shm::allGather(calls.next("allgather"), data.data(), out.data(),
                             std::vector<size_t>(world, data.size() * sizeof(float)));
      }
    });
    std::vector<std::string> fragments(world, "ran allreduce float32 SUM where this rank ran "
                                              "allgather");
    fragments[0] = "ran allgather where this rank ran allreduce float32 SUM";
    expectAllFailed(errors, fragments);
    for (const auto& e : errors) {
      ASSERT_TRUE(e.has_value());
      EXPECT_NE(std::string(e->what()).find("different collectives"), std::string::npos);
    }
  }
}

TEST(ShmMismatch, SameCollectiveWithAnotherCountOrDtype) {
  auto counts = errorsOf(2, [&](int rank, ShmCalls& calls) {
    std::vector<int32_t> data(rank == 0 ? 100 : 200, 1);
    algo::shm::allReduce(calls.next("allreduce"), data.data(), data.size(), DataType::kInt32,
                         ReduceOp::kSum);
  });
  expectAllFailed(counts, {"different sizes", "different sizes"});

  auto dtypes = errorsOf(2, [&](int rank, ShmCalls& calls) {
    std::vector<int32_t> data(64, 1);  // the same bytes, read as int32 or float32
    algo::shm::allReduce(calls.next("allreduce"), data.data(), data.size(),
                         rank == 0 ? DataType::kInt32 : DataType::kFloat32, ReduceOp::kSum);
  });
  expectAllFailed(dtypes, {"ran allreduce float32 SUM where this rank ran allreduce int32 SUM",
                           "ran allreduce int32 SUM where this rank ran allreduce float32 SUM"});
}

TEST(ShmMismatch, BroadcastFromDifferentRootsIsNamedByTheReceivers) {
  auto errors = errorsOf(3, [&](int rank, ShmCalls& calls) {
    std::vector<uint8_t> data(100, static_cast<uint8_t>(rank));
    // Ranks 1 and 2 think rank 0 is the root; rank 0 thinks rank 1 is. So every rank receives,
    // waits for its root, and finds that root's signature (another root) disagreeing.
    algo::shm::broadcast(calls.next("broadcast"), data.data(), data.size(), rank == 0 ? 1 : 0);
  });
  for (int r : {0, 1, 2}) {
    ASSERT_TRUE(errors[r].has_value()) << "rank " << r;
    EXPECT_NE(std::string(errors[r]->what()).find("different sizes (or root)"), std::string::npos)
        << errors[r]->what();
  }
}

TEST(ShmMismatch, TheSegmentRefusesFurtherCollectivesAfterAMismatch) {
  auto errors = errorsOf(2, [&](int rank, ShmCalls& calls) {
    std::vector<int32_t> data(8, 1);
    try {
      if (rank == 0) {
        algo::shm::barrier(calls.next("barrier"));
      } else {
        algo::shm::allReduce(calls.next("allreduce"), data.data(), data.size(), DataType::kInt32,
                             ReduceOp::kMax);
      }
    } catch (const Error&) {
    }
    algo::shm::barrier(calls.next("barrier"));  // must refuse, not hang or pass
  });
  for (const auto& e : errors) {
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->kind(), ErrorKind::kAborted) << e->what();
    EXPECT_NE(std::string(e->what()).find("unusable"), std::string::npos) << e->what();
  }
}

}  // namespace
}  // namespace xccl
