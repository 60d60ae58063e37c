// The pure parts of the CUDA IPC workspaces (net/regions/cuda_ipc): the layout every rank allocates
// and the record each rank publishes through the store. No GPU needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/device_handle.h"
#include "net/regions/cuda_ipc/layout.h"
#include "net/regions/cuda_ipc/record.h"
#include "net/rendezvous/bootstrap.h"
#include "threads.h"

namespace xccl {
namespace {

using net::Bytes;
using net::cuda_ipc::AttemptKeys;
using net::cuda_ipc::attemptKeys;
using net::cuda_ipc::decodeRecord;
using net::cuda_ipc::encodeRecord;
using net::cuda_ipc::layoutFor;
using net::cuda_ipc::Record;
using net::cuda_ipc::recordsVerdict;
using net::cuda_ipc::WorkspaceLayout;

constexpr size_t kAlign = 256;
constexpr size_t kFlagBytes = sizeof(kernels::FlagArea);
constexpr size_t kEpochBytes = kernels::kMaxBlocks * sizeof(uint32_t);

TEST(CudaIpcLayout, PartsAreAlignedOrderedAndTight) {
  for (size_t dataBytes :
       {size_t{0}, size_t{1}, size_t{3}, size_t{255}, size_t{256}, size_t{257}, size_t{4095},
        size_t{10007}, size_t{1} << 20, (size_t{1} << 20) + 7, size_t{3} << 30}) {
    SCOPED_TRACE(dataBytes);
    const WorkspaceLayout l = layoutFor(dataBytes);
    EXPECT_EQ(l.dataBytes, dataBytes);
    for (size_t offset : {l.flagsOffset, l.epochsOffset, l.errorOffset, l.totalBytes}) {
      EXPECT_EQ(offset % kAlign, 0u) << offset;
    }
    // Each part follows the previous one without overlap and with less than one unit of padding.
    EXPECT_GE(l.flagsOffset, dataBytes);
    EXPECT_LT(l.flagsOffset - dataBytes, kAlign);
    EXPECT_GE(l.epochsOffset, l.flagsOffset + kFlagBytes);
    EXPECT_LT(l.epochsOffset - (l.flagsOffset + kFlagBytes), kAlign);
    EXPECT_GE(l.errorOffset, l.epochsOffset + kEpochBytes);
    EXPECT_LT(l.errorOffset - (l.epochsOffset + kEpochBytes), kAlign);
    EXPECT_GE(l.totalBytes, l.errorOffset + sizeof(uint32_t));
    EXPECT_LT(l.totalBytes - (l.errorOffset + sizeof(uint32_t)), kAlign);
    // The flag rows keep the alignment their writers rely on.
    EXPECT_EQ(l.flagsOffset % alignof(kernels::FlagArea), 0u);
  }
}

TEST(CudaIpcLayout, KnownOffsetsWithoutData) {
  // 80 rows of 128 bytes, then 80 epochs (320 bytes, padded to 512), then the error word.
  const WorkspaceLayout l = layoutFor(0);
  EXPECT_EQ(l.flagsOffset, 0u);
  EXPECT_EQ(l.epochsOffset, 10240u);
  EXPECT_EQ(l.errorOffset, 10752u);
  EXPECT_EQ(l.totalBytes, 11008u);
  // The fixed parts are the same size whatever the data size, once it is a multiple of 256.
  const WorkspaceLayout m = layoutFor(1 << 20);
  EXPECT_EQ(m.totalBytes - m.flagsOffset, l.totalBytes);
}

TEST(CudaIpcLayout, SizesThatWouldWrapAreRejected) {
  const size_t max = std::numeric_limits<size_t>::max();
  EXPECT_EQ(testing::errorKindOf([&] { layoutFor(max); }), ErrorKind::kInvalidArgument);
  EXPECT_EQ(testing::errorKindOf([&] { layoutFor(max - kFlagBytes); }),
            ErrorKind::kInvalidArgument);
  const WorkspaceLayout l = layoutFor(max / 2);
  EXPECT_GT(l.totalBytes, l.errorOffset);
  EXPECT_GT(l.flagsOffset, max / 4);
}

Record sampleRecord() {
  Record r;
  for (size_t i = 0; i < r.handle.size(); ++i) r.handle[i] = static_cast<uint8_t>(0xA0 ^ (i * 7));
  r.address = 0x7f12'3456'7800ull;
  for (size_t i = 0; i < r.flagsHandle.size(); ++i) r.flagsHandle[i] = static_cast<uint8_t>(3 * i);
  r.flagsAddress = 0x7f12'9999'0000ull;
  r.pid = 4242;
  r.processToken = 0x0123'4567'89ab'cdefull;
  r.device = 3;
  r.busId = "0000:19:00.0";
  r.dataBytes = (size_t{1} << 20) + 7;
  return r;
}

void expectSame(const Record& a, const Record& b) {
  EXPECT_EQ(a.handle, b.handle);
  EXPECT_EQ(a.address, b.address);
  EXPECT_EQ(a.flagsHandle, b.flagsHandle);
  EXPECT_EQ(a.flagsAddress, b.flagsAddress);
  EXPECT_EQ(a.pid, b.pid);
  EXPECT_EQ(a.processToken, b.processToken);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.busId, b.busId);
  EXPECT_EQ(a.dataBytes, b.dataBytes);
  EXPECT_EQ(a.failed, b.failed);
  EXPECT_EQ(a.failureKind, b.failureKind);
  EXPECT_EQ(a.failure, b.failure);
}

TEST(CudaIpcRecord, RoundTrip) {
  const Record r = sampleRecord();
  expectSame(decodeRecord(encodeRecord(r)), r);

  Record failed;
  failed.failed = true;
  failed.failureKind = ErrorKind::kSystem;
  failed.failure = "cudaIpcGetMemHandle failed: cudaErrorNotSupported";
  expectSame(decodeRecord(encodeRecord(failed)), failed);

  Record empty;  // defaults, empty strings, negative device
  expectSame(decodeRecord(encodeRecord(empty)), empty);
}

TEST(CudaIpcRecord, EveryErrorKindSurvives) {
  for (ErrorKind kind : {ErrorKind::kInternal, ErrorKind::kInvalidArgument, ErrorKind::kTimeout,
                         ErrorKind::kPeerFailure, ErrorKind::kSystem, ErrorKind::kAborted}) {
    Record r;
    r.failed = true;
    r.failureKind = kind;
    r.failure = errorKindName(kind);
    EXPECT_EQ(decodeRecord(encodeRecord(r)).failureKind, kind);
  }
}

TEST(CudaIpcRecord, OverlongFieldsAreCutOrRefusedWhenEncoding) {
  Record r;
  r.failed = true;
  r.failure = std::string(net::cuda_ipc::kMaxFailureBytes + 100, 'x');
  EXPECT_EQ(decodeRecord(encodeRecord(r)).failure.size(), net::cuda_ipc::kMaxFailureBytes);

  Record bus = sampleRecord();
  bus.busId = std::string(net::cuda_ipc::kMaxBusIdBytes + 1, '0');
  EXPECT_EQ(testing::errorKindOf([&] { encodeRecord(bus); }), ErrorKind::kInternal);
}

TEST(CudaIpcRecord, TruncatedOrPaddedRecordsAreRejected) {
  const Bytes good = encodeRecord(sampleRecord());
  for (size_t length = 0; length < good.size(); ++length) {
    SCOPED_TRACE(length);
    const Bytes cut(good.begin(), good.begin() + length);
    EXPECT_EQ(testing::errorKindOf([&] { decodeRecord(cut); }), ErrorKind::kInternal);
  }
  Bytes longer = good;
  longer.push_back(0);
  EXPECT_EQ(testing::errorKindOf([&] { decodeRecord(longer); }), ErrorKind::kInternal);
}

TEST(CudaIpcRecord, ForeignOrCorruptRecordsAreRejected) {
  // A record with empty strings ends in: u8 failed, u8 kind, u32 bus id length, u32 failure length.
  const Bytes good = encodeRecord(Record{});
  const size_t failedAt = good.size() - 10, kindAt = good.size() - 9, busLengthAt = good.size() - 8;
  auto corrupted = [&](size_t at, uint8_t value) {
    Bytes b = good;
    b[at] = value;
    return b;
  };
  EXPECT_EQ(testing::errorKindOf([&] { decodeRecord(corrupted(0, good[0] ^ 1)); }),
            ErrorKind::kInternal)
      << "magic";
  EXPECT_EQ(testing::errorKindOf([&] { decodeRecord(corrupted(4, good[4] + 1)); }),
            ErrorKind::kInternal)
      << "version";
  EXPECT_EQ(testing::errorKindOf([&] { decodeRecord(corrupted(failedAt, 2)); }),
            ErrorKind::kInternal)
      << "failed flag";
  EXPECT_EQ(testing::errorKindOf([&] { decodeRecord(corrupted(kindAt, 200)); }),
            ErrorKind::kInternal)
      << "error kind";
  // A bus id length beyond the limit, and one within it that runs past the end.
  EXPECT_EQ(testing::errorKindOf([&] { decodeRecord(corrupted(busLengthAt + 1, 1)); }),
            ErrorKind::kInternal);
  EXPECT_EQ(testing::errorKindOf([&] { decodeRecord(corrupted(busLengthAt, 5)); }),
            ErrorKind::kInternal);
  // Text that is not a record at all (e.g. another transport's key under the same prefix).
  EXPECT_EQ(testing::errorKindOf([&] { decodeRecord(net::toBytes("+4096 xccl-123-abc")); }),
            ErrorKind::kInternal);
}

// Issue 9 defect 4: a retry must never read an earlier attempt's records or votes.
TEST(CudaIpcAttempts, EveryKeyOfAnAttemptIsUnderItsOwnPrefix) {
  const AttemptKeys a0 = attemptKeys("xccl/gpu_ws", 0), a1 = attemptKeys("xccl/gpu_ws", 1);
  EXPECT_EQ(a0.records, "xccl/gpu_ws/0/records");
  EXPECT_EQ(a0.votes, "xccl/gpu_ws/0/votes");
  EXPECT_EQ(a0.released, "xccl/gpu_ws/0/released");
  EXPECT_EQ(a1.records, "xccl/gpu_ws/1/records");
  // Pairwise distinct within and across attempts, and no key is a prefix of another (a rank's
  // key is "<key>/<rank>", so a prefix relation could alias two keys).
  const std::vector<std::string> all = {a0.records,
                                        a0.votes,
                                        a0.released,
                                        a1.records,
                                        a1.votes,
                                        a1.released,
                                        attemptKeys("xccl/gpu_ws", 10).records};
  for (size_t i = 0; i < all.size(); ++i) {
    for (size_t j = 0; j < all.size(); ++j) {
      if (i == j) continue;
      EXPECT_NE((all[j] + "/").rfind(all[i] + "/", 0), 0u) << all[i] << " " << all[j];
    }
  }
  EXPECT_EQ(testing::errorKindOf([] { attemptKeys("p", -1); }), ErrorKind::kInvalidArgument);
}

TEST(CudaIpcAttempts, StaleRecordsOfAnEarlierAttemptAreNotRead) {
  // Attempt 0 left a failed record for every rank; attempt 1's gather sees only its own.
  net::MemoryStore store;
  Record failed;
  failed.failed = true;
  failed.failure = "stale";
  for (int r = 0; r < 2; ++r) {
    store.set(attemptKeys("ws", 0).records + "/" + std::to_string(r), encodeRecord(failed));
  }
  std::vector<Record> seen(2);
  testing::runThreads(2, [&](int rank) {
    Record mine = sampleRecord();
    mine.pid = rank;
    const auto all = net::Bootstrap(store, "", rank, 2, std::chrono::seconds(10))
                         .allGather(attemptKeys("ws", 1).records, encodeRecord(mine));
    seen[rank] = decodeRecord(all[1 - rank]);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(seen[r].failed);
    EXPECT_EQ(seen[r].pid, 1 - r);
  }
}

TEST(CudaIpcAttempts, RecordsVerdictNamesFailedRanksAlike) {
  std::vector<Record> records(4, sampleRecord());
  EXPECT_EQ(recordsVerdict(records), "");
  for (int r : {1, 3}) {
    records[r] = Record{};
    records[r].failed = true;
    records[r].failure = "cudaMalloc failed: cudaErrorMemoryAllocation";
  }
  records[2] = Record{};
  records[2].failed = true;  // no reason given still says no
  EXPECT_EQ(recordsVerdict(records),
            "ranks 1,3: cudaMalloc failed: cudaErrorMemoryAllocation; rank 2: failed");
}

TEST(CudaIpcAttempts, UnequalDataSizesAreTheCallersBug) {
  std::vector<Record> records(3, sampleRecord());
  records[2].dataBytes += 256;
  std::string message;
  try {
    recordsVerdict(records);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    message = e.what();
  }
  EXPECT_NE(message.find("rank 2 passed " + std::to_string(records[2].dataBytes)),
            std::string::npos)
      << message;
  // A failed rank has no data size: its failure is the verdict, not a size mismatch.
  records[2] = Record{};
  records[2].failed = true;
  records[2].failure = "no device";
  EXPECT_EQ(recordsVerdict(records), "rank 2: no device");
}

}  // namespace
}  // namespace xccl
