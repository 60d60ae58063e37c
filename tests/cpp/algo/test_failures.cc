// Failure behaviour of the collectives: a rank that never joins makes the others time out at
// their deadline with a message naming it; a rank that aborts mid-collective makes the others
// fail promptly, long before the deadline, with its reason; ranks that call different
// collectives at one sequence number fail naming both.
#include <condition_variable>
#include <mutex>

#include "algo/collectives.h"
#include "algo_testing.h"
#include "harness.h"

namespace xccl {
namespace {

using algo::Algorithm;
using testing::errorFrom;
using testing::runRanks;
using namespace std::chrono_literals;

// Rank threads meet here before they destroy their transports, so that no rank's exit (a closed
// connection) can race with the failure another rank is expected to observe.
class Latch {
 public:
  explicit Latch(int count) : count_(count) {}
  void countDown() {
    std::lock_guard<std::mutex> guard(mutex_);
    if (--count_ == 0) zero_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    zero_.wait(lock, [&] { return count_ <= 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable zero_;
  int count_;
};

algo::Context contextFor(net::Transport& transport, uint64_t seq, const std::string& what,
                         net::Deadline deadline, Algorithm algorithm) {
  algo::Tunables tunables;
  tunables.forced = algorithm;
  tunables.ringChunkBytes = 4096;
  return {transport, seq, what + " #" + std::to_string(seq), deadline, tunables};
}

// ---------------------------------------------------------------------------------------------

struct SilentCase {
  const char* name;
  Algorithm algorithm;
  bool barrier;  // else all_reduce
};

class MissingRank : public ::testing::TestWithParam<SilentCase> {};

TEST_P(MissingRank, OthersTimeOutAtTheDeadlineNamingIt) {
  const SilentCase& c = GetParam();
  constexpr int kWorld = 3, kSilent = 2;
  Latch checked(kWorld - 1);
  runRanks(kWorld, [&](int rank, net::Transport& transport) {
    if (rank == kSilent) {  // in the group, connected, but never calls the collective
      checked.wait();
      return;
    }
    std::vector<float> data(7, 1.0f);
    const net::Deadline deadline = net::Clock::now() + 500ms;
    const std::string what = c.barrier ? "barrier" : "allreduce";
    auto error = errorFrom([&] {
      algo::Context ctx = contextFor(transport, 1, what, deadline, c.algorithm);
      if (c.barrier) {
        algo::barrier(ctx);
      } else {
        algo::allReduce(ctx, data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
      }
    });
    const net::Clock::time_point now = net::Clock::now();
    checked.countDown();
    checked.wait();
    if (!error) {
      ADD_FAILURE() << "rank " << rank << " completed without rank " << kSilent;
      return;
    }
    const std::string message = error->what();
    EXPECT_EQ(error->kind(), ErrorKind::kTimeout) << message;
    EXPECT_NE(message.find(what + " #1 timed out"), std::string::npos) << message;
    // Each rank names the peers it was waiting on. Direct exchange waits on everyone, and at
    // three ranks every barrier rank waits on the silent one directly; a ring rank waits only on
    // its left neighbour, so only the silent rank's right neighbour can name it (the others name
    // a neighbour that is itself stuck, as do barrier ranks whose partner is stuck at 4+ ranks).
    if (c.algorithm != Algorithm::kRing || rank == (kSilent + 1) % kWorld) {
      EXPECT_NE(message.find("no data from rank(s) [2]"), std::string::npos)
          << "rank " << rank << ": " << message;
    }
    EXPECT_GE(now, deadline) << "gave up before the deadline";
    EXPECT_LT(now - deadline, 3s) << "gave up long after the deadline";
  });
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, MissingRank,
    ::testing::Values(SilentCase{"allreduce_direct", Algorithm::kDirect, false},
                      SilentCase{"allreduce_ring", Algorithm::kRing, false},
                      SilentCase{"barrier", Algorithm::kAuto, true}),
    [](const ::testing::TestParamInfo<SilentCase>& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------

// Forwards to a real transport, and aborts it just before its n-th isend: in the middle of
// whatever collective is running, after some of its messages went out.
class AbortingTransport final : public net::Transport {
 public:
  AbortingTransport(net::Transport& inner, int abortBeforeSend, std::string reason)
      : inner_(inner), abortBeforeSend_(abortBeforeSend), reason_(std::move(reason)) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const char* name() const override { return "aborting"; }
  net::RequestPtr isend(int peer, net::MessageTag tag, const void* data, size_t bytes,
                        net::Completion onDone) override {
    if (++sends_ == abortBeforeSend_) inner_.abort(reason_);
    return inner_.isend(peer, tag, data, bytes, std::move(onDone));
  }
  net::RequestPtr irecv(int peer, net::MessageTag tag, void* data, size_t bytes,
                        net::Completion onDone) override {
    return inner_.irecv(peer, tag, data, bytes, std::move(onDone));
  }
  void wait(const std::vector<net::RequestPtr>& requests, net::Deadline deadline,
            const std::string& what) override {
    inner_.wait(requests, deadline, what);
  }
  void abort(const std::string& reason) override { inner_.abort(reason); }
  void setStatusProvider(std::function<std::string()> provider) override {
    inner_.setStatusProvider(std::move(provider));
  }
  std::vector<std::string> queryStatus(net::Deadline deadline) override {
    return inner_.queryStatus(deadline);
  }

 private:
  net::Transport& inner_;
  const int abortBeforeSend_;  // 0: never
  const std::string reason_;
  int sends_ = 0;
};

struct AbortCase {
  const char* name;
  Algorithm algorithm;
  int world;
  size_t count;  // float32 elements
  int abortBeforeSend;  // on rank 2
};

class AbortingRank : public ::testing::TestWithParam<AbortCase> {};

TEST_P(AbortingRank, OthersFailPromptlyWithTheReason) {
  const AbortCase& c = GetParam();
  constexpr int kAborter = 2;
  const std::string reason = "rank 2 hit an injected fault";
  Latch checked(c.world);
  runRanks(c.world, [&](int rank, net::Transport& tcp) {
    AbortingTransport transport(tcp, rank == kAborter ? c.abortBeforeSend : 0, reason);
    std::vector<float> data(c.count, 1.0f);
    auto allReduce = [&](uint64_t seq) {
      return errorFrom([&] {
        algo::allReduce(contextFor(transport, seq, "allreduce", net::Clock::now() + 30s,
                                   c.algorithm),
                        data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum);
      });
    };
    const ErrorKind expected = rank == kAborter ? ErrorKind::kAborted : ErrorKind::kPeerFailure;
    auto start = net::Clock::now();
    auto error = allReduce(1);
    auto elapsed = net::Clock::now() - start;
    if (!error) {
      ADD_FAILURE() << "rank " << rank << " completed the collective despite the abort";
    } else {
      const std::string message = error->what();
      EXPECT_EQ(error->kind(), expected) << "rank " << rank << ": " << message;
      EXPECT_NE(message.find("allreduce #1 failed"), std::string::npos) << message;
      EXPECT_NE(message.find(reason), std::string::npos) << message;
      if (rank != kAborter) {
        EXPECT_NE(message.find("rank 2 aborted the communicator"), std::string::npos) << message;
      }
    }
    EXPECT_LT(elapsed, 5s) << "rank " << rank << " was not told promptly";

    // The communicator stays failed: the next collective fails at once, for the same reason.
    start = net::Clock::now();
    error = allReduce(2);
    elapsed = net::Clock::now() - start;
    if (!error) {
      ADD_FAILURE() << "rank " << rank << " completed a collective after the abort";
    } else {
      EXPECT_EQ(error->kind(), expected) << error->what();
      EXPECT_NE(std::string(error->what()).find(reason), std::string::npos) << error->what();
    }
    EXPECT_LT(elapsed, 2s);
    checked.countDown();
    checked.wait();
  });
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, AbortingRank,
    ::testing::Values(AbortCase{"direct_world3", Algorithm::kDirect, 3, 7, 1},
                      AbortCase{"ring_world4", Algorithm::kRing, 4, 50000, 10}),
    [](const ::testing::TestParamInfo<AbortCase>& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------

// Ranks that call different collectives at one sequence number, with message sizes that agree
// byte for byte, must fail promptly naming both collectives instead of mixing the data.
struct MismatchCase {
  const char* name;
  Algorithm algorithm;
  DataType otherType;  // rank 1's all_reduce dtype (when it runs an all_reduce)
  ReduceOp otherOp;  // rank 1's all_reduce op
  bool otherIsAllGather;  // rank 1 runs all_gather instead
  const char* otherName;  // how rank 0's error must describe rank 1's collective
};

class MismatchedCollectives : public ::testing::TestWithParam<MismatchCase> {};

TEST_P(MismatchedCollectives, FailPromptlyNamingBoth) {
  const MismatchCase& c = GetParam();
  constexpr int kWorld = 2;
  constexpr size_t kCount = 1001;
  Latch checked(kWorld);
  runRanks(kWorld, [&](int rank, net::Transport& transport) {
    std::vector<uint32_t> data(kCount, 1);  // 4-byte elements for every dtype used here
    std::vector<uint32_t> gathered(kCount * kWorld);
    const net::Clock::time_point start = net::Clock::now();
    auto error = errorFrom([&] {
      algo::Context ctx = contextFor(transport, 1, "collective", start + 10s, c.algorithm);
      if (rank == 0) {
        algo::allReduce(ctx, data.data(), kCount, DataType::kFloat32, ReduceOp::kSum);
      } else if (c.otherIsAllGather) {
        algo::allGather(ctx, data.data(), gathered.data(), {kCount * 4, kCount * 4});
      } else {
        algo::allReduce(ctx, data.data(), kCount, c.otherType, c.otherOp);
      }
    });
    const auto elapsed = net::Clock::now() - start;
    checked.countDown();
    checked.wait();
    if (!error) {
      ADD_FAILURE() << "rank " << rank << " completed a mismatched collective";
      return;
    }
    const std::string message = error->what();
    EXPECT_EQ(error->kind(), ErrorKind::kPeerFailure) << message;
    EXPECT_NE(message.find("different collectives"), std::string::npos) << message;
    const std::string mine = rank == 0 ? "allreduce float32 SUM" : c.otherName;
    const std::string theirs = rank == 0 ? c.otherName : "allreduce float32 SUM";
    EXPECT_NE(message.find("rank " + std::to_string(1 - rank) + " ran " + theirs),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("this rank ran " + mine), std::string::npos) << message;
    EXPECT_LT(elapsed, 5s) << "rank " << rank << " was not told promptly";
  });
}

INSTANTIATE_TEST_SUITE_P(
    Collectives, MismatchedCollectives,
    ::testing::Values(MismatchCase{"allgather_direct", Algorithm::kDirect, DataType::kFloat32,
                                   ReduceOp::kSum, true, "allgather"},
                      MismatchCase{"dtype_ring", Algorithm::kRing, DataType::kInt32, ReduceOp::kSum,
                                   false, "allreduce int32 SUM"},
                      MismatchCase{"reduce_op_direct", Algorithm::kDirect, DataType::kFloat32,
                                   ReduceOp::kMax, false, "allreduce float32 MAX"}),
    [](const ::testing::TestParamInfo<MismatchCase>& info) { return info.param.name; });

}  // namespace
}  // namespace xccl
