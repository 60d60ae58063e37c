// Registered memory: one fi_mr_reg'd range (MemoryRegion), the Registration handed to callers of
// Transport::registerMemory, and how a 64-bit write signal travels in remote CQ data.
#pragma once

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstdint>
#include <memory>

#include "net/ofi/fabric.h"
#include "net/transport.h"

namespace xccl::net::ofi {

// Honours the domain's MR modes: FI_MR_PROV_KEY (the provider picks the key, else `key` is
// requested), FI_MR_ENDPOINT (bound to the endpoint and enabled). Closed on destruction.
class MemoryRegion {
 public:
  MemoryRegion(const Fabric& fabric, const void* data, size_t bytes, uint64_t access, uint64_t key);
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  void* desc() const { return fi_mr_desc(mr_); }
  uint64_t key() const { return fi_mr_key(mr_); }

 private:
  fid_mr* mr_ = nullptr;
};

class OfiRegistration final : public Registration {
 public:
  OfiRegistration(std::shared_ptr<MemoryRegion> region, RemoteRegion remote)
      : region_(std::move(region)), remote_(remote) {}
  RemoteRegion remote() const override { return remote_; }
  const MemoryRegion& region() const { return *region_; }

 private:
  std::shared_ptr<MemoryRegion> region_;
  RemoteRegion remote_;
};

// Remote CQ data holds the writer's rank in its top 16 bits and the signal below, since the
// target's completion names no source otherwise (no FI_SOURCE needed). With 8 bytes of CQ data
// (tcp, verbs, efa) a signal has 48 bits; a larger one is refused before anything is written.
struct SignalCodec {
  explicit SignalCodec(size_t cqDataBytes)
      : signalBits(cqDataBytes >= 8 ? 48 : (cqDataBytes * 8 > 16 ? cqDataBytes * 8 - 16 : 0)) {}
  bool fits(int rank, uint64_t signal) const {
    return signalBits > 0 && rank < (1 << 16) && (signalBits >= 64 || signal >> signalBits == 0);
  }
  uint64_t encode(int rank, uint64_t signal) const {
    return (static_cast<uint64_t>(rank) << signalBits) | signal;
  }
  int rankOf(uint64_t data) const { return static_cast<int>(data >> signalBits); }
  uint64_t signalOf(uint64_t data) const { return data & ((uint64_t{1} << signalBits) - 1); }
  size_t signalBits;
};

}  // namespace xccl::net::ofi
