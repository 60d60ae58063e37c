// What each rank publishes through the store when it creates a CUDA IPC workspace (workspace.h):
// either its exported allocation or why it could not make one, so that every rank of the group
// fails together and at once instead of waiting out the timeout for a record that never comes.
//
// Plain C++: no CUDA headers. The cudaIpcMemHandle_t travels as opaque bytes (workspace.cc
// static_asserts that it has kIpcHandleBytes).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "net/rendezvous/store.h"

namespace xccl::net::cuda_ipc {

constexpr size_t kIpcHandleBytes = 64;  // sizeof(cudaIpcMemHandle_t), CUDA_IPC_HANDLE_SIZE
constexpr size_t kMaxBusIdBytes = 64;   // "0000:19:00.0" needs 13 with its terminator
constexpr size_t kMaxFailureBytes = 16 * 1024;

struct Record {
  // The allocation, mapped in another process with cudaIpcOpenMemHandle.
  std::array<uint8_t, kIpcHandleBytes> handle{};
  // The allocation's address in the publishing process: usable directly by a peer in that same
  // process (unified addressing), meaningless anywhere else.
  uint64_t address = 0;
  // ROCm: the flag area, an allocation of its own (runtime.h, kFlagAreaApart), exported and
  // addressed the same way. Unset where the flag area is part of the allocation above (CUDA).
  std::array<uint8_t, kIpcHandleBytes> flagsHandle{};
  uint64_t flagsAddress = 0;
  // Together they tell whether a peer is this very process: pids alone repeat across pid
  // namespaces (containers on one host), and a fork()ed child inherits the token but not the pid.
  int64_t pid = 0;
  uint64_t processToken = 0;
  // The device as the publishing process numbers it (its CUDA_VISIBLE_DEVICES), and its PCI bus
  // id, which names the same GPU in every process. For messages only: the handle alone says where
  // the memory is.
  int32_t device = -1;
  std::string busId;
  uint64_t dataBytes = 0;  // every rank must pass the same
  // Set when this rank could not create or export its allocation; the fields above are then
  // unset. The peers throw `failureKind` with `failure` as the reason.
  bool failed = false;
  ErrorKind failureKind = ErrorKind::kInternal;
  std::string failure;
};

// Versioned and self-checking: decodeRecord throws kInternal for anything encodeRecord of this
// version would not have produced (wrong magic or version, truncated, trailing bytes, lengths or
// enum values out of range), e.g. a stale key of an unrelated group under the same prefix.
Bytes encodeRecord(const Record& record);
Record decodeRecord(const Bytes& bytes);

// The store keys of one Workspace::createAgreed() attempt, all under "<prefix>/<attempt>/": a
// retry (a higher attempt, counted alike on every rank) never reads an earlier attempt's records
// or votes, which a store keeps forever. Throws kInvalidArgument for a negative attempt.
struct AttemptKeys {
  std::string records;  // each rank's Record
  std::string votes;  // each rank's objection to using the workspace ("" for yes)
  std::string released;  // after a "no": each rank has closed its mappings of the others
};
AttemptKeys attemptKeys(const std::string& prefix, int attempt);

// The group's verdict on one attempt's records, computed alike on every rank from the same
// records: "" when every rank created and exported its part, else why not (each failed rank's
// reason, ranks with the same reason grouped: net::tally). Throws kInvalidArgument when every rank
// succeeded but they passed different data sizes (a caller's bug, not a limit of the machine).
std::string recordsVerdict(const std::vector<Record>& records);

}  // namespace xccl::net::cuda_ipc
