#include "net/transport/ofi/memory.h"

#include <rdma/fi_errno.h>
#include <sys/random.h>

#include "common/logging.h"
#include "net/transport/ofi/op.h"
#include "net/transport/ofi/transport.h"
#include "net/transport/ofi/wire.h"

namespace xccl::net::ofi {
namespace {

// A key already in use in the domain (FI_ENOKEY) is drawn again, this often at most: with 64-bit
// keys a clash is already unlikely; narrower keys make it likelier, never certain.
constexpr int kKeyDraws = 16;

// A requested key from getrandom, within the domain's key width and never 0. Random, not
// counted: with FI_MR_PROV_KEY unset the key (with an address) is all a remote writer needs.
uint64_t randomKey(size_t keyBytes) {
  uint64_t key = 0;
  while (key == 0) {
    XCCL_SYSCHECK(::getrandom(&key, sizeof(key), 0), "getrandom for a memory registration key");
    if (keyBytes < sizeof(key)) key &= (uint64_t{1} << (8 * keyBytes)) - 1;
  }
  return key;
}

}  // namespace

MemoryRegion::MemoryRegion(const Fabric& fabric, const void* data, size_t bytes, uint64_t access) {
  const fi_domain_attr* domain = fabric.info()->domain_attr;
  const uint64_t modes = domain->mr_mode;
  // FI_MR_PROV_KEY: the provider picks the key and ignores the one requested.
  const bool requested = (modes & FI_MR_PROV_KEY) == 0;
  for (int draw = 1;; ++draw) {
    const uint64_t key = requested ? randomKey(domain->mr_key_size) : 0;
    const int ret = fi_mr_reg(fabric.domain(), data, bytes, access, 0, key, 0, &mr_, nullptr);
    if (ret == -FI_ENOKEY && requested && draw < kKeyDraws) continue;
    check(ret, "fi_mr_reg");
    break;
  }
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
  auto region = std::make_shared<MemoryRegion>(*fabric_, data, bytes,
                                               FI_REMOTE_WRITE | FI_WRITE | FI_SEND | FI_RECV);
  RemoteRegion remote;
  remote.address = reinterpret_cast<uint64_t>(data);
  remote.bytes = bytes;
  remote.key = region->key();  // FI_MR_PROV_KEY: the provider's; else the random one requested
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
  Op* op = Op::make(Op::Type::kWrite, peer, request);
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

// Progress thread: a peer's write landed here (the provider reports the remote CQ data only
// once the written bytes are in place).
void OfiTransport::onSignal(uint64_t data) {
  int peer = -1;
  uint64_t signal = 0;
  if (!codec_->decode(data, size_, &peer, &signal) || peer == rank_) {
    // Not written by a peer of this group (or corrupt): dropped, and logged at doubling counts
    // so that a flood of them cannot flood the log too.
    const uint64_t dropped = ++droppedSignals_;
    if ((dropped & (dropped - 1)) == 0) {
      XCCL_WARN("ofi", "dropped a write completion naming writer rank ",
                codec_->signalBits >= 64 ? 0 : data >> codec_->signalBits, " in a group of ", size_,
                " (rank ", rank_, "); ", dropped, " dropped so far");
    }
    return;
  }
  if (key_ && !proven_[peer]) {
    dropForged(
        detail::concat("a write completion naming rank ", peer, ", which has not proven the key"));
    return;
  }
  std::lock_guard<std::mutex> guard(mutex_);
  if (signals_.arrivedLocked(peer, signal)) completed_.notify_all();
}

}  // namespace xccl::net::ofi
