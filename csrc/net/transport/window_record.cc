#include "net/transport/window_record.h"

#include <charconv>

#include "common/error.h"

namespace xccl::net {

std::string formatWindowRecord(const WindowRecord& record) {
  std::string out =
      detail::concat(record.dtype, ' ', record.remote.address, ' ', record.remote.bytes, ' ',
                     record.remote.key, ' ', record.remote.hostKey, ' ', record.sizes.size());
  for (int64_t size : record.sizes) out += ' ' + std::to_string(size);
  return out;
}

WindowRecord parseWindowRecord(const std::string& text) {
  size_t at = 0;
  // The next space-separated decimal field; from_chars refuses signs it cannot hold, spaces and
  // prefixes, and reports overflow instead of wrapping.
  auto next = [&](auto* value, const char* what) {
    XCCL_CHECK(at <= text.size(), "window record '", text.substr(0, 200), "' in the store: no ",
               what);
    const size_t end = std::min(text.find(' ', at), text.size());
    const auto [stop, error] = std::from_chars(text.data() + at, text.data() + end, *value);
    XCCL_CHECK(error == std::errc() && stop == text.data() + end && end > at, "window record '",
               text.substr(0, 200), "' in the store: bad ", what);
    at = end + 1;
  };
  WindowRecord record;
  next(&record.dtype, "dtype");
  next(&record.remote.address, "address");
  next(&record.remote.bytes, "size in bytes");
  next(&record.remote.key, "key");
  next(&record.remote.hostKey, "host key");
  size_t dims = 0;
  next(&dims, "number of dimensions");
  XCCL_CHECK(dims <= kMaxWindowDims, "window record in the store has ", dims,
             " dimensions (at most ", kMaxWindowDims, ")");
  record.sizes.resize(dims);
  for (int64_t& size : record.sizes) {
    next(&size, "size");
    XCCL_CHECK(size >= 0 && !__builtin_mul_overflow(record.numel, size, &record.numel),
               "window record '", text.substr(0, 200), "' in the store: size ", size,
               " is negative or the element count passes 2^63");
  }
  XCCL_CHECK(at == text.size() + 1, "window record '", text.substr(0, 200),
             "' in the store: trailing text");
  return record;
}

std::string checkWindowFits(const WindowRecord& record, size_t elementSize, uint64_t mappedBytes,
                            bool registered) {
  const std::string shape = detail::concat(record.numel, " elements of ", elementSize, " bytes");
  if (elementSize == 0) return detail::concat("its dtype ", record.dtype, " has no element size");
  uint64_t bytes = 0;
  if (record.numel < 0 ||
      __builtin_mul_overflow(static_cast<uint64_t>(record.numel), elementSize, &bytes)) {
    return detail::concat("its shape of ", shape, " passes 2^64 bytes");
  }
  if (bytes != mappedBytes) {
    return detail::concat("its shape of ", shape, " (", bytes, " bytes) is not its window of ",
                          mappedBytes, " bytes");
  }
  if (registered && record.remote.bytes != mappedBytes) {
    return detail::concat("it registered ", record.remote.bytes,
                          " bytes with the transport, not its window's ", mappedBytes);
  }
  return "";
}

}  // namespace xccl::net
