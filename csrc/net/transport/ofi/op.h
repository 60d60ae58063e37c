// One operation handed to libfabric. libfabric returns &context as the completion's op_context;
// the transport owns the Op (its live_ set) from posting until that completion.
#pragma once

#include <rdma/fabric.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "net/transport/transport.h"

namespace xccl::net::ofi {

struct Op {
  fi_context2 context;  // first, so the completion's op_context is the Op
  enum class Type {
    kHeaderRecv,  // a slot for any peer's header; reposted after each one
    kSend,        // a header (with inline payload) or a large payload
    kDataRecv,    // a large payload into the user's buffer
    kDiscard,     // a large payload nobody takes (mismatch): received into nothing
    kWrite,       // fi_writedata (fi_write without a signal)
    kAuthRecv,    // a slot for any peer's key exchange message (auth.h), while the exchange runs
  } type;
  int peer = -1;
  RequestPtr request;     // completed or failed with this op (may be null)
  bool completes = true;  // false: a large send's header (its payload op completes the request)
  const void* data = nullptr;  // what is sent or where it is received
  size_t bytes = 0;
  uint64_t tag = 0;
  std::vector<uint8_t> buffer;  // owned bytes: a header and inline payload, or a header slot
  std::shared_ptr<void> region;  // keeps the MemoryRegion behind `desc` alive
  void* desc = nullptr;
  uint64_t remoteAddress = 0, remoteKey = 0, cqData = 0;  // kWrite
  bool signalled = true;  // kWrite: with remote CQ data (fi_writedata), else fi_write
  int postError = 0;  // the libfabric error posting failed with, to report from the progress thread
  uint64_t postedNs = 0;  // XCCL_OFI_TRACE: when the provider took it

  // A new op of `type` for `peer` that completes or fails `request`; owned by whoever posts it.
  static Op* make(Type type, int peer, RequestPtr request) {
    Op* op = new Op{};
    op->type = type;
    op->peer = peer;
    op->request = std::move(request);
    return op;
  }
  // A receive slot of `type` (kHeaderRecv, kAuthRecv) for any peer's message on `tag`: it owns a
  // buffer of `bytes` to receive into and is reposted after each message.
  static Op* slot(Type type, size_t bytes, uint64_t tag) {
    Op* op = make(type, -1, nullptr);
    op->buffer.resize(bytes);
    op->data = op->buffer.data();
    op->bytes = op->buffer.size();
    op->tag = tag;
    return op;
  }
};

}  // namespace xccl::net::ofi
