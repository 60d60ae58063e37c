// Names of the files xccl creates in /dev/shm (segments, point-to-point rings, windows); what the
// rank that creates one publishes through the store, and the checks a peer applies to that record
// before it opens a file by that name: the record may be stale (an earlier incarnation's) or
// foreign, so its sizes are bounded and its name can only be one of xccl's files directly in
// /dev/shm. The record functions are pure (tests/fuzz/fuzz_store_values.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "net/rendezvous/store.h"

namespace xccl::net::shm {

// A fresh name "xccl-<kind><pid>-[<tag>-]<64 random bits>" (kind: "" for segments, "p2p-" for
// rings, "w" for windows; tag: the incarnation `store` belongs to, net/rendezvous/incarnation.h):
// which process and which group creation made a leftover is readable from the name, and O_EXCL
// makes a collision an error, never a shared file. Every name starts with kNamePrefix (segment.h).
std::string newFileName(const char* kind, const Store& store);

// Longest name accepted from the store: newFileName()s are about 50 bytes; NAME_MAX is 255.
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
