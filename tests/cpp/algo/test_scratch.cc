// KeptScratch: what a thread keeps between calls, within its bound.
#include <gtest/gtest.h>

#include <thread>

#include "algo/scratch.h"

namespace xccl::algo {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(KeptScratch, ASlotIsReusedWhileItIsLargeEnough) {
  std::thread([] {
    uint8_t* first = KeptScratch(0, 8 * kMiB).data();
    first[8 * kMiB - 1] = 7;
    EXPECT_EQ(KeptScratch(0, 4 * kMiB).data(), first);  // smaller: the same buffer
    uint8_t* other = KeptScratch(1, 8 * kMiB).data();
    EXPECT_NE(other, first);  // each slot its own
    EXPECT_EQ(KeptScratch(0, 8 * kMiB).data()[8 * kMiB - 1], 7);  // kept, not rewritten
  }).join();
}

TEST(KeptScratch, ThreadsKeepTheirOwn) {
  uint8_t* mine = KeptScratch(0, kMiB).data();
  uint8_t* theirs = nullptr;
  std::thread([&] { theirs = KeptScratch(0, kMiB).data(); }).join();
  EXPECT_NE(mine, theirs);
  EXPECT_EQ(KeptScratch(0, kMiB).data(), mine);
}

TEST(KeptScratch, ARequestPastTheBoundIsTheCallsOwn) {
  std::thread([] {
    constexpr size_t kBound = KeptScratch::kKeptScratchBytes;
    uint8_t* kept = KeptScratch(0, kMiB).data();
    {
      // Past the bound alone (never touched: the pages are not faulted in).
      KeptScratch huge(0, kBound + 1);
      EXPECT_NE(huge.data(), nullptr);
      EXPECT_NE(huge.data(), kept);
    }
    EXPECT_EQ(KeptScratch(0, kMiB).data(), kept);  // the slot was left as it was
    // Within the bound alone, but not beside what slot 0 keeps: slot 1 does not keep it.
    KeptScratch big(1, kBound - kMiB / 2);
    EXPECT_NE(KeptScratch(1, kMiB / 2).data(), big.data());
    // Slot 1 keeps what fits beside slot 0.
    uint8_t* fits = KeptScratch(1, kBound - kMiB).data();
    EXPECT_EQ(KeptScratch(1, kMiB).data(), fits);
  }).join();
}

TEST(KeptScratch, ASlotOutsideTheRangeIsRefused) {
  EXPECT_ANY_THROW(KeptScratch(-1, 1));
  EXPECT_ANY_THROW(KeptScratch(KeptScratch::kSlots, 1));
}

}  // namespace
}  // namespace xccl::algo
