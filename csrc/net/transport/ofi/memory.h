// Registered memory: one fi_mr_reg'd range (MemoryRegion), the Registration handed to callers of
// Transport::registerMemory (how a write signal travels in remote CQ data: wire.h).
#pragma once

#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>

#include <cstdint>
#include <memory>

#include "net/transport/ofi/fabric.h"
#include "net/transport/transport.h"

namespace xccl::net::ofi {

// Honours the domain's MR modes: FI_MR_PROV_KEY (the provider picks the key, else a random one
// is requested), FI_MR_ENDPOINT (bound to the endpoint and enabled). Closed on destruction.
class MemoryRegion {
 public:
  MemoryRegion(const Fabric& fabric, const void* data, size_t bytes, uint64_t access);
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

}  // namespace xccl::net::ofi
