// The TCP progress thread runs on TcpOptions::progressCpus (docs/topology.md, "Pinning"): read
// back from inside a completion callback, which runs on the progress thread.
#include <sys/syscall.h>
#include <unistd.h>

#include "common/env.h"
#include "common/thread_affinity.h"
#include "harness.h"

namespace xccl {
namespace {

using net::MessageTag;
using net::TagSpace;

MessageTag p2p(uint64_t tag) { return {TagSpace::kPointToPoint, 0, tag}; }
net::Deadline soon() { return net::Clock::now() + std::chrono::seconds(10); }
pid_t threadId() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// What rank 1 saw: the thread that completed its receive, that thread's allowed CPUs, and the
// rank's own thread.
struct Observed {
  pid_t completer = 0;
  std::vector<int> completerCpus;
  pid_t caller = 0;
  std::vector<int> callerCpus;
};

// Rank 1 posts a receive and only then tells rank 0 to send, so the data arrives after the
// receive was posted and the progress thread (not the caller) completes it.
Observed exchangeAndObserve(const net::tcp::TcpOptions& options) {
  Observed seen;
  testing::runRanks(2, options, [&](int rank, net::Transport& t) {
    int value = 0;
    int ready = 0;
    if (rank == 1) {
      seen.caller = threadId();
      auto recv = t.irecv(0, p2p(2), &value, sizeof(value), [&seen](const net::Request&) {
        seen.completer = threadId();
        seen.completerCpus = affinity::allowedCpus();
      });
      ready = 1;
      t.wait({t.isend(0, p2p(1), &ready, sizeof(ready))}, soon(), "ready");
      t.wait({recv}, soon(), "data");
      EXPECT_EQ(value, 42);
      seen.callerCpus = affinity::allowedCpus();
    } else {
      t.wait({t.irecv(1, p2p(1), &ready, sizeof(ready))}, soon(), "ready");
      value = 42;
      t.wait({t.isend(1, p2p(2), &value, sizeof(value))}, soon(), "data");
    }
  });
  return seen;
}

TEST(TcpPinning, ProgressThreadRunsOnTheGivenCpus) {
  const std::vector<int> allowed = affinity::allowedCpus();
  if (allowed.size() < 2) GTEST_SKIP() << "one allowed CPU: pinning cannot be observed";
  if (!env::getBool("XCCL_PIN_PROGRESS")) GTEST_SKIP() << "XCCL_PIN_PROGRESS=0";
  net::tcp::TcpOptions options = testing::loopbackOptions("pin");
  options.progressCpus = {allowed.back()};
  Observed seen = exchangeAndObserve(options);
  ASSERT_NE(seen.completer, 0) << "the completion callback never ran";
  EXPECT_NE(seen.completer, seen.caller) << "completed on the caller's thread, not the progress "
                                            "thread";
  EXPECT_EQ(seen.completerCpus, std::vector<int>{allowed.back()});
  EXPECT_EQ(seen.callerCpus, allowed) << "pinning leaked into the rank's own thread";
}

TEST(TcpPinning, NoCpusLeaveTheProgressThreadAlone) {
  const std::vector<int> allowed = affinity::allowedCpus();
  Observed seen = exchangeAndObserve(testing::loopbackOptions("nopin"));
  ASSERT_NE(seen.completer, 0);
  EXPECT_NE(seen.completer, seen.caller);
  EXPECT_EQ(seen.completerCpus, allowed);
}

TEST(TcpPinning, CpusOutsideTheAllowedSetAreIgnored) {
  const std::vector<int> allowed = affinity::allowedCpus();
  net::tcp::TcpOptions options = testing::loopbackOptions("badpin");
  options.progressCpus = {7999};  // no machine this runs on has it
  Observed seen = exchangeAndObserve(options);
  ASSERT_NE(seen.completer, 0);
  EXPECT_EQ(seen.completerCpus, allowed);
}

}  // namespace
}  // namespace xccl
