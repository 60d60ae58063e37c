#include "net/regions/cuda_ipc/record.h"

#include <cstring>
#include <type_traits>

#include "net/rendezvous/agree.h"

namespace xccl::net::cuda_ipc {
namespace {

// Wire format, native byte order (both ends run on one host):
//   u32 magic, u32 version, u8[64] handle, u64 address, u8[64] flagsHandle, u64 flagsAddress,
//   i64 pid, u64 processToken, i32 device,
//   u64 dataBytes, u8 failed, u8 failureKind, u32 busId length, busId, u32 failure length, failure
constexpr uint32_t kMagic = 0x43504958;  // "XIPC" in memory on little-endian hosts
constexpr uint32_t kVersion = 2;

// -Wswitch flags this switch when ErrorKind grows, so a new kind is never rejected as malformed.
bool isErrorKind(uint8_t value) {
  switch (static_cast<ErrorKind>(value)) {
    case ErrorKind::kInternal:
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kTimeout:
    case ErrorKind::kPeerFailure:
    case ErrorKind::kSystem:
    case ErrorKind::kAborted: return true;
  }
  return false;
}

class Writer {
 public:
  template <typename T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void putString(const std::string& text) {
    put(static_cast<uint32_t>(text.size()));
    out_.insert(out_.end(), text.begin(), text.end());
  }
  Bytes take() { return std::move(out_); }

 private:
  Bytes out_;
};

class Reader {
 public:
  explicit Reader(const Bytes& in) : in_(in) {}
  template <typename T>
  T get(const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::string getString(const char* what, size_t maxBytes) {
    const uint32_t length = get<uint32_t>(what);
    if (length > maxBytes) {
      XCCL_THROW(ErrorKind::kInternal, "malformed cuda_ipc record: ", what, " of ", length,
                 " bytes (at most ", maxBytes, ")");
    }
    need(length, what);
    std::string text(reinterpret_cast<const char*>(in_.data() + at_), length);
    at_ += length;
    return text;
  }
  void expectEnd() const {
    if (at_ != in_.size()) {
      XCCL_THROW(ErrorKind::kInternal, "malformed cuda_ipc record: ", in_.size() - at_,
                 " trailing bytes after ", at_);
    }
  }

 private:
  void need(size_t bytes, const char* what) const {
    if (in_.size() - at_ < bytes) {
      XCCL_THROW(ErrorKind::kInternal, "malformed cuda_ipc record: truncated at ", what, " (",
                 in_.size(), " bytes)");
    }
  }
  const Bytes& in_;
  size_t at_ = 0;
};

}  // namespace

Bytes encodeRecord(const Record& record) {
  XCCL_CHECK(record.busId.size() <= kMaxBusIdBytes, "bus id '", record.busId, "'");
  Writer w;
  w.put(kMagic);
  w.put(kVersion);
  w.put(record.handle);
  w.put(record.address);
  w.put(record.flagsHandle);
  w.put(record.flagsAddress);
  w.put(record.pid);
  w.put(record.processToken);
  w.put(record.device);
  w.put(record.dataBytes);
  w.put(static_cast<uint8_t>(record.failed));
  w.put(static_cast<uint8_t>(record.failureKind));
  w.putString(record.busId);
  // A reason is for people: cut rather than fail over an overlong one.
  w.putString(record.failure.substr(0, kMaxFailureBytes));
  return w.take();
}

Record decodeRecord(const Bytes& bytes) {
  Reader r(bytes);
  const auto magic = r.get<uint32_t>("magic");
  if (magic != kMagic) {
    XCCL_THROW(ErrorKind::kInternal, "malformed cuda_ipc record: magic 0x", std::hex, magic,
               " instead of 0x", kMagic);
  }
  const auto version = r.get<uint32_t>("version");
  if (version != kVersion) {
    XCCL_THROW(ErrorKind::kInternal, "cuda_ipc record of version ", version, " (this build reads ",
               kVersion, "): ranks run different xccl builds");
  }
  Record record;
  record.handle = r.get<std::array<uint8_t, kIpcHandleBytes>>("handle");
  record.address = r.get<uint64_t>("address");
  record.flagsHandle = r.get<std::array<uint8_t, kIpcHandleBytes>>("flags handle");
  record.flagsAddress = r.get<uint64_t>("flags address");
  record.pid = r.get<int64_t>("pid");
  record.processToken = r.get<uint64_t>("process token");
  record.device = r.get<int32_t>("device");
  record.dataBytes = r.get<uint64_t>("data bytes");
  const auto failed = r.get<uint8_t>("failed");
  const auto kind = r.get<uint8_t>("failure kind");
  if (failed > 1 || !isErrorKind(kind)) {
    XCCL_THROW(ErrorKind::kInternal, "malformed cuda_ipc record: failed ", int{failed}, ", kind ",
               int{kind});
  }
  record.failed = failed != 0;
  record.failureKind = static_cast<ErrorKind>(kind);
  record.busId = r.getString("bus id", kMaxBusIdBytes);
  record.failure = r.getString("failure", kMaxFailureBytes);
  r.expectEnd();
  return record;
}

AttemptKeys attemptKeys(const std::string& prefix, int attempt) {
  XCCL_CHECK_ARG(attempt >= 0, "cuda_ipc workspace '", prefix, "': attempt ", attempt,
                 " (attempts count from 0)");
  const std::string base = prefix + "/" + std::to_string(attempt) + "/";
  return {base + "records", base + "votes", base + "released"};
}

std::string recordsVerdict(const std::vector<Record>& records) {
  std::vector<std::string> failures;
  for (const Record& record : records) {
    // A failed rank with an empty reason still says no.
    failures.push_back(!record.failed ? "" : record.failure.empty() ? "failed" : record.failure);
  }
  const std::string verdict = tally(failures);
  if (!verdict.empty()) return verdict;
  for (size_t r = 1; r < records.size(); ++r) {
    XCCL_CHECK_ARG(records[r].dataBytes == records[0].dataBytes,
                   "cuda_ipc workspace: ranks disagree on the data size: rank 0 passed ",
                   records[0].dataBytes, " bytes, rank ", r, " passed ", records[r].dataBytes);
  }
  return "";
}

}  // namespace xccl::net::cuda_ipc
