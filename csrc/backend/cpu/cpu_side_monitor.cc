// The CPU side's monitored barrier (cpu_side.h): torch.distributed.monitored_barrier.
//
// Rank 0 coordinates, as torch documents for gloo: every other rank sends rank 0 an empty
// "arrived" message and waits for its "release"; rank 0 waits for every arrival within the
// timeout and only then releases everyone, so either all ranks pass or none does. Rank 0 names
// the ranks that did not arrive in torch's own words ("Rank 1 failed to pass monitoredBarrier in
// 2000 ms", "Ranks 1, 3 failed ..." with wait_all_ranks), which code matching gloo's message
// relies on. When rank 0's own timeout ran out before it could wait for a rank that had not
// arrived, it blames itself as gloo does ("Rank 0 timed out in monitoredBarrier after 0 ms.").
//
// Unlike gloo, the other ranks do not wait out the group timeout after rank 0 gave up: rank 0's
// failure marks the group unusable (like any xccl timeout), and aborting its transport carries
// the message to every rank at once, to those waiting for the release and to the absent ones at
// their next call. The messages travel in their own tag space (net::TagSpace::kMonitoredBarrier),
// numbered by this side's own count, so a monitored barrier never consumes a collective sequence
// number and is never queued behind the executor's collectives: it runs on the caller's thread.
#include <c10/util/Exception.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/core/group_core.h"
#include "backend/core/torch_error.h"
#include "backend/cpu/cpu_side.h"

namespace xccl::backend {
namespace {

constexpr uint32_t kArrived = 0;  // step of the message to rank 0
constexpr uint32_t kRelease = 1;  // step of rank 0's answer

std::string joinRanks(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace

void CpuSide::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  group_.checkUsable("monitoredBarrier");
  const std::chrono::milliseconds timeout = group_.sequencer().effectiveTimeout(opts.timeout);
  // Every rank counts its calls alike, so the i-th call of each rank meets the others' i-th.
  const uint64_t count = ++monitoredBarriers_;
  if (size_ == 1) return;
  net::Transport& transport = *group_.membership().transport();
  auto tag = [count](uint32_t step) {
    return net::MessageTag{net::TagSpace::kMonitoredBarrier, step, count};
  };
  const std::string what = "monitoredBarrier #" + std::to_string(count);

  if (rank_ != 0) {
    // Like gloo, only rank 0 enforces the barrier's timeout, so that it, not a rank that merely
    // waited, reports who is missing; here the wait is bounded by the group's timeout (gloo's
    // too), ending earlier as soon as rank 0 fails.
    std::vector<net::RequestPtr> requests{transport.isend(0, tag(kArrived), nullptr, 0),
                                          transport.irecv(0, tag(kRelease), nullptr, 0)};
    try {
      transport.wait(requests, net::Clock::now() + std::max(timeout, group_.sequencer().timeout()),
                     what);
    } catch (const std::exception& e) {
      std::string message = "Rank " + std::to_string(rank_) +
                            " successfully reached monitoredBarrier, but received errors while "
                            "waiting for send/recv from rank 0. Please check rank 0 logs for "
                            "faulty rank.\n Original exception: \n" +
                            e.what();
      group_.markBroken(message);
      throwTorchError(errorKindOf(e), message);
    }
    return;
  }

  // Rank 0. All arrivals are awaited together, so the whole wait is bounded by one timeout even
  // with wait_all_ranks (gloo waits up to the full timeout for each missing rank in turn).
  const net::Deadline deadline = net::Clock::now() + timeout;
  // Rank 0's own time ran out before it could wait for a rank that had not answered (a timeout
  // of 0, or rank 0 held up): no peer used the time, so rank 0 is the one that timed out, in
  // gloo's words, followed by the ranks it was still waiting for.
  auto timedOut = [&](const std::vector<int>& passed, const std::vector<int>& waiting,
                      const char* doing) {
    std::string message = "Rank 0 timed out in monitoredBarrier after " +
                          std::to_string(timeout.count()) + " ms.\n" +
                          (passed.empty() ? std::string("No ranks successfully processed in "
                                                        "monitoredBarrier.")
                                          : "Successfully processed ranks: " + joinRanks(passed)) +
                          "\nStill " + doing + " ranks: " + joinRanks(waiting);
    group_.markBroken(message);
    throwTorchError(ErrorKind::kTimeout, message);
  };
  // Waits for each peer's request in rank order; returns the ranks whose request failed or did
  // not complete by the deadline, and adds a line per such rank to `details`.
  auto awaitEach = [&](const std::vector<net::RequestPtr>& requests, std::string* details,
                       const char* doing) {
    std::vector<int> missing, passed;
    for (int peer = 1; peer < size_; ++peer) {
      const net::RequestPtr& request = requests[peer - 1];
      if (missing.empty() && !request->done() && net::Clock::now() >= deadline) {
        std::vector<int> waiting;
        for (int r = peer; r < size_; ++r) {
          if (!requests[r - 1]->done()) waiting.push_back(r);
        }
        timedOut(passed, waiting, doing);
      }
      try {
        transport.wait({request}, deadline, what);
        passed.push_back(peer);
      } catch (const std::exception& e) {
        missing.push_back(peer);
        *details += (details->empty() ? "" : "\n") + std::string(e.what());
        if (!waitAllRanks) break;  // fail fast, naming the first rank missing, as gloo does
      }
    }
    return missing;
  };
  auto fail = [&](const std::vector<int>& missing, const std::string& detail) {
    std::string message = std::string("[Rank 0]: ") + (missing.size() == 1 ? "Rank " : "Ranks ") +
                          joinRanks(missing) + " failed to pass monitoredBarrier in " +
                          std::to_string(timeout.count()) + " ms\n Original exception: \n" + detail;
    group_.markBroken(message);
    throwTorchError(ErrorKind::kTimeout, message);
  };

  std::vector<net::RequestPtr> arrivals;
  for (int peer = 1; peer < size_; ++peer) {
    arrivals.push_back(transport.irecv(peer, tag(kArrived), nullptr, 0));
  }
  std::string detail;
  std::vector<int> missing = awaitEach(arrivals, &detail, "waiting for the arrival of");
  if (!missing.empty()) fail(missing, detail);
  // Everyone arrived: release them all. A rank that died since fails its release, and it is
  // named like a missing one (gloo waits for the releases the same way).
  std::vector<net::RequestPtr> releases;
  for (int peer = 1; peer < size_; ++peer) {
    releases.push_back(transport.isend(peer, tag(kRelease), nullptr, 0));
  }
  missing = awaitEach(releases, &detail, "releasing");
  if (!missing.empty()) fail(missing, detail);
}

}  // namespace xccl::backend
