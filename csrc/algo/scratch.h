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

}  // namespace xccl::algo
