// One rank's window registration as every rank of the group learns it through the store
// (backend/window/window.cc): its dtype, shape and the transport's RemoteRegion. Torch-free, so the
// parser of what peers publish and the check of its shape against the memory behind it can be
// fuzzed (tests/fuzz/fuzz_store_values.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "net/transport/transport.h"

namespace xccl::net {

// Most dimensions a record may carry; torch tensors in practice have a handful.
constexpr size_t kMaxWindowDims = 64;

struct WindowRecord {
  int dtype = 0;  // c10::ScalarType's number; the backend checks it names one
  RemoteRegion remote;
  std::vector<int64_t> sizes;
  int64_t numel = 1;  // the product of sizes: parseWindowRecord checks it fits in 63 bits
};

// "<dtype> <address> <bytes> <key> <hostKey> <dims> <size>...", decimal.
std::string formatWindowRecord(const WindowRecord& record);
// The inverse; throws kInternal naming the record for anything formatWindowRecord would not
// write: a number out of its type's range, more than kMaxWindowDims sizes, a negative size, a
// product of sizes past INT64_MAX, missing or trailing text.
WindowRecord parseWindowRecord(const std::string& text);

// A record's shape is only the peer's word; the memory a view or a write reaches is what was
// really mapped or registered. "" when the record's numel elements of `elementSize` bytes (the
// product checked for overflow) are exactly `mappedBytes`, the bytes behind the window (a peer's
// shared-memory file as mapped here: its size as fstat found it, less the header; for a peer
// whose window is not mapped here, what it registered with the transport) and, when
// `registered`, exactly record.remote.bytes too. Else why, with the numbers; an elementSize of 0
// (a dtype without one) never fits.
std::string checkWindowFits(const WindowRecord& record, size_t elementSize, uint64_t mappedBytes,
                            bool registered);

}  // namespace xccl::net
