// Bytes an algorithm overwrites before it reads them (receive buffers, packed copies).
// std::vector<uint8_t>(n) zero-fills its bytes: for a large collective that is a memset of the
// whole message on every call, and dropping it took a 32 MiB all_reduce between two hosts from
// 47 to 29 ms (benchmarks/RESULTS.md). These bytes start uninitialised instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace xccl::algo {

class ScratchBytes {
 public:
  ScratchBytes() = default;
  explicit ScratchBytes(size_t bytes)
      : bytes_(bytes ? new uint8_t[bytes] : nullptr), size_(bytes) {}

  uint8_t* data() { return bytes_.get(); }
  const uint8_t* data() const { return bytes_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  std::unique_ptr<uint8_t[]> bytes_;  // new uint8_t[n]: default-initialised, so not written
  size_t size_ = 0;
};

// Scratch that the calling thread keeps between calls, for a buffer a collective needs on every
// call (the ring's receive scratch). glibc serves an allocation above its largest mmap
// threshold (32 MiB) with a new mapping each time, whose pages the kernel zero-fills and faults
// in on first touch: keeping it took a 64 MiB all_reduce between two hosts from 71 to 58 ms
// (benchmarks/RESULTS.md). A thread keeps at most kKeptScratchBytes over its slots; a larger
// request gets a buffer of its own for the call, as before.
class KeptScratch {
 public:
  static constexpr size_t kKeptScratchBytes = size_t{256} << 20;
  static constexpr int kSlots = 2;

  // At least `bytes` for this call: slot `slot` (0 <= slot < kSlots) of this thread, valid until
  // the thread asks for that slot again, or, when keeping it would pass kKeptScratchBytes, a
  // buffer of its own. The bytes are uninitialised (what the slot held before).
  explicit KeptScratch(int slot, size_t bytes);
  uint8_t* data() { return data_; }

 private:
  ScratchBytes own_;  // a request the thread does not keep
  uint8_t* data_ = nullptr;
};

}  // namespace xccl::algo
