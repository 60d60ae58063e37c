// Mutation check of the emulated kernel tests: built with XCCL_EMULATED_MUTANTS, so barrier.cuh's
// XCCL_BARRIER_SKIP_WAIT hook reads emulation::skippedSync. Each mutation skips the flag wait of
// one sync() (by its index in the kernel: 1 start, 2 end or two-shot's middle, 3 two-shot's end)
// or of all of them, in every kernel, while the signals are still stored. The coverage sequences
// of test_gpu_emulated must then fail for EVERY collective whose kernel has that sync, and keep
// passing for the others. The sync() call sites (docs/algorithms.md, "How the kernels are tested"):
//   directReduceKernel (one-shot, reduce-scatter): 1 start, 2 end
//   twoShotKernel (two-shot all-reduce):            1 start, 2 middle, 3 end
//   pullCopyKernel (all-gather, broadcast, a2a):    1 start, 2 end
// A start wait missing lets a rank read a peer's buffer before the peer's copy-in of this call;
// an end wait missing lets a rank copy in its next input while a peer still reads the current
// one; a middle wait missing lets stage 2 read slices not reduced yet. Which run caught each
// mutation is printed, so the report is in the test log.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "gpu/emulated_collectives.h"
#include "kernels/gpu.h"  // the emulation one (searched first): skippedSync

namespace xccl::kernels {
namespace {

using emulated::Collective;

// Seeds tried per collective before a mutation counts as unnoticed. A wrong interleaving needs
// the delays to line up; with 24+ calls per sequence one seed has sufficed in every run so far.
constexpr int kSeeds = 6;

class BarrierMutation : public ::testing::TestWithParam<int> {
 protected:
  void TearDown() override { emulation::skippedSync = -1; }
};

TEST_P(BarrierMutation, FailsEveryAffectedCollective) {
  const int skipped = GetParam();
  emulation::skippedSync = skipped;
  for (Collective c : {Collective::kOneShot, Collective::kTwoShot, Collective::kReduceScatter,
                       Collective::kAllGather, Collective::kBroadcast, Collective::kAllToAll}) {
    const bool affected = skipped == 0 || skipped <= emulated::syncsPerKernel(c);
    const DataType dtype = emulated::isReduce(c) ? DataType::kFloat32 : DataType::kUInt8;
    std::string failure;
    int seed = 1;
    for (; seed <= (affected ? kSeeds : 1) && failure.empty(); ++seed) {
      failure = emulated::runSequence(emulated::coverageSequence(c, 3, dtype, seed));
    }
    const std::string mutation =
        skipped == 0 ? "every wait" : "the wait of sync " + std::to_string(skipped);
    if (affected) {
      EXPECT_NE(failure, "") << "skipping " << mutation << " of " << emulated::collectiveName(c)
                             << " went unnoticed with " << kSeeds << " seeds";
      if (!failure.empty()) {
        std::cout << "skip " << mutation << ": " << emulated::collectiveName(c)
                  << " caught at seed " << seed - 1 << ": " << failure << "\n";
      }
    } else {
      EXPECT_EQ(failure, "") << emulated::collectiveName(c) << " has no sync " << skipped;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Emulated, BarrierMutation, ::testing::Values(1, 2, 3, 0),
                         [](const auto& info) {
                           return info.param == 0 ? std::string("SkipAllWaits")
                                                  : "SkipWaitOfSync" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace xccl::kernels
