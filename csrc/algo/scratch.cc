#include "algo/scratch.h"

#include "common/error.h"

namespace xccl::algo {

KeptScratch::KeptScratch(int slot, size_t bytes) {
  XCCL_CHECK(slot >= 0 && slot < kSlots, "scratch slot ", slot, " is not below ", kSlots);
  thread_local ScratchBytes kept[kSlots];
  ScratchBytes& mine = kept[slot];
  if (mine.size() >= bytes) {
    data_ = mine.data();
    return;
  }
  size_t others = 0;  // what the thread keeps in its other slots
  for (int s = 0; s < kSlots; ++s) others += s == slot ? 0 : kept[s].size();
  if (bytes <= kKeptScratchBytes && others <= kKeptScratchBytes - bytes) {
    mine = ScratchBytes();  // the old buffer goes first: both are never held at once
    mine = ScratchBytes(bytes);
    data_ = mine.data();
  } else {
    own_ = ScratchBytes(bytes);
    data_ = own_.data();
  }
}

}  // namespace xccl::algo
