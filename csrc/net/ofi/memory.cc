#include "net/ofi/memory.h"

#include <rdma/fi_errno.h>

#include "net/ofi/op.h"
#include "net/ofi/transport.h"

namespace xccl::net::ofi {

MemoryRegion::MemoryRegion(const Fabric& fabric, const void* data, size_t bytes, uint64_t access,
                           uint64_t key) {
  const uint64_t modes = fabric.info()->domain_attr->mr_mode;
  check(fi_mr_reg(fabric.domain(), data, bytes, access, 0, key, 0, &mr_, nullptr), "fi_mr_reg");
  if (modes & FI_MR_ENDPOINT) {
    try {
      check(fi_mr_bind(mr_, &fabric.ep()->fid, 0), "fi_mr_bind");
      check(fi_mr_enable(mr_), "fi_mr_enable");
    } catch (...) {
      fi_close(&mr_->fid);
      throw;
    }
  }
}

MemoryRegion::~MemoryRegion() {
  if (mr_ != nullptr) fi_close(&mr_->fid);
}

// OfiTransport's one-sided operations: registration, fi_writedata, and the target's side.

std::unique_ptr<Registration> OfiTransport::registerMemory(void* data, size_t bytes) {
  XCCL_CHECK_ARG(data != nullptr || bytes == 0, "registerMemory: null memory of ", bytes, " bytes");
  XCCL_CHECK_ARG(codec_->signalBits > 0, "the ofi provider ", provider(), " carries only ",
                 fabric_->info()->domain_attr->cq_data_size,
                 " bytes of remote CQ data: too few for one-sided write signals");
  uint64_t key;
  {
    std::lock_guard<std::mutex> guard(opsMutex_);
    key = nextKey_++;
  }
  auto region = std::make_shared<MemoryRegion>(*fabric_, data, bytes,
                                               FI_REMOTE_WRITE | FI_WRITE | FI_SEND | FI_RECV, key);
  RemoteRegion remote;
  remote.address = reinterpret_cast<uint64_t>(data);
  remote.bytes = bytes;
  remote.key = region->key();  // FI_MR_PROV_KEY: the provider's; else the one requested
  return std::make_unique<OfiRegistration>(std::move(region), remote);
}

RequestPtr OfiTransport::iwrite(int peer, const void* data, size_t bytes, const RemoteRegion& dst,
                                uint64_t dstOffset, uint64_t signal, Completion onDone) {
  XCCL_CHECK_ARG(peer >= 0 && peer < size_ && peer != rank_, "cannot write to rank ", peer,
                 " from rank ", rank_, " of ", size_);
  auto request =
      std::make_shared<Request>(peer, MessageTag{}, bytes, /*isSend=*/true, std::move(onDone));
  std::lock_guard<std::mutex> guard(mutex_);
  if (dstOffset > dst.bytes || bytes > dst.bytes - dstOffset) {
    request->failLocked(
        Error(ErrorKind::kInvalidArgument,
              detail::concat("iwrite of ", bytes, " bytes at offset ", dstOffset, " to rank ", peer,
                             " exceeds its ", dst.bytes, "-byte region; nothing was written")));
    return request;
  }
  if (!codec_->fits(rank_, signal)) {
    request->failLocked(
        Error(ErrorKind::kInvalidArgument,
              detail::concat("iwrite signal ", signal, " from rank ", rank_, " does not fit the ",
                             codec_->signalBits, " bits that ", provider(),
                             "'s remote CQ data leaves for it; nothing was written")));
    return request;
  }
  if (const Error* refusal = health_.refusalLocked(peer, TagSpace::kPointToPoint)) {
    request->failLocked(*refusal);
    return request;
  }
  Op* op = new Op{};
  op->type = Op::Type::kWrite;
  op->peer = peer;
  op->request = request;
  op->data = data;
  op->bytes = bytes;
  // FI_MR_VIRT_ADDR: the target address is virtual; otherwise it is an offset into the region.
  op->remoteAddress = (virtAddr_ ? dst.address : 0) + dstOffset;
  op->remoteKey = dst.key;
  // Signal 0 is no signal: a plain fi_write, which raises no completion at the target at all.
  op->signalled = signal != 0;
  op->cqData = codec_->encode(rank_, signal);
  try {
    op->desc = localDesc(op, data, bytes);
  } catch (const Error& e) {
    delete op;
    request->failLocked(e);
    return request;
  }
  post(op);
  return request;
}

RequestPtr OfiTransport::iwaitWrite(int peer, uint64_t signal, Completion onDone) {
  XCCL_CHECK_ARG(peer >= 0 && peer < size_ && peer != rank_, "cannot wait for a write from rank ",
                 peer, " on rank ", rank_, " of ", size_);
  XCCL_CHECK_ARG(signal != 0, "iwaitWrite: signal 0 means no signal; no write completes it");
  auto request =
      std::make_shared<Request>(peer, MessageTag{}, 0, /*isSend=*/false, std::move(onDone));
  std::lock_guard<std::mutex> guard(mutex_);
  auto arrived = writesArrived_.find({peer, signal});
  if (arrived != writesArrived_.end()) {
    if (--arrived->second == 0) writesArrived_.erase(arrived);
    request->completeLocked(peer);
    return request;
  }
  if (const Error* refusal = health_.refusalLocked(peer, TagSpace::kPointToPoint)) {
    request->failLocked(*refusal);
    return request;
  }
  writeWaits_.push_back({peer, signal, request});
  return request;
}

// Progress thread: a peer's write landed here (the provider reports the remote CQ data only
// once the written bytes are in place).
void OfiTransport::onSignal(uint64_t data) {
  const int peer = codec_->rankOf(data);
  const uint64_t signal = codec_->signalOf(data);
  if (signal == 0) return;  // never sent (see iwrite); counting it would grow writesArrived_
  std::lock_guard<std::mutex> guard(mutex_);
  for (auto it = writeWaits_.begin(); it != writeWaits_.end(); ++it) {
    if (it->peer == peer && it->signal == signal) {
      it->request->completeLocked(peer);
      writeWaits_.erase(it);
      completed_.notify_all();
      return;
    }
  }
  ++writesArrived_[{peer, signal}];
}

}  // namespace xccl::net::ofi
