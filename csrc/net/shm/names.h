// What the rank that creates a shared-memory file publishes through the store, and the checks a
// peer applies to it before it opens a file by that name: the record may be stale (an earlier
// incarnation's) or foreign, so its sizes are bounded and its name can only be one of xccl's files
// directly in /dev/shm. Pure functions (tests/fuzz/fuzz_store_values.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xccl::net::shm {

// Longest name accepted from the store: newName()s are about 40 bytes; NAME_MAX is 255.
constexpr size_t kMaxNameBytes = 128;
// Largest size a record may carry: XCCL_SHM_*_BYTES stop at 1 TiB too (common/env.cc).
constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 40;

// kNamePrefix, then letters, digits, '-', '_' or '.', at most kMaxNameBytes: never a path.
bool isFileName(const std::string& name);

struct SizeBound {
  const char* what;  // names the number in errors ("slot bytes")
  uint64_t min, max;
};

struct Published {
  bool made = false;           // false: `why` says why the creator made no file
  std::string why;
  std::vector<uint64_t> sizes;  // one per bound, each within it
  std::string name;             // isFileName()
};

// "+<size> ... <name>" (sizes in decimal), or "-<why>" when the creator made none.
std::string formatPublished(const std::vector<uint64_t>& sizes, const std::string& name);
std::string formatRefusal(const std::string& why);

// The inverse of both formats for records of `bounds.size()` sizes; throws kInternal naming the
// record and what is wrong with it (an empty record, a number that is not strict decimal or is
// outside its bound, a bad name).
Published parsePublished(const std::string& text, const std::vector<SizeBound>& bounds);

}  // namespace xccl::net::shm
