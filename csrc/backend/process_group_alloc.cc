// Tensors the backend allocates (c10d's supportsTensorAlloc / allocateTensor / getMemAllocator,
// which FSDP2 calls for its communication buffers once
// set_allocate_memory_from_process_group_for_comm(True)): CPU tensors in this rank's pool of the
// group's shared-memory segment (net/regions/shm/pool.h), which the shm all_gather and
// reduce_scatter read in place instead of copying through the slots. A group without a segment, or
// a pool with no room, gives ordinary tensors (counted). Memory statistics: getMemoryStats.
// docs/training.md, docs/shm.md ("Tensors in the pool").
#include <ATen/EmptyTensor.h>
#include <c10/core/CPUAllocator.h>

#include "backend/process_group.h"

namespace xccl::backend {

// The c10::Allocator behind allocateTensor. Each pool block's DataPtr holds a Lease, which holds
// the pool (and so its mapping) until the last tensor from it dies, even after the group is gone.
class PoolAllocator final : public c10::Allocator {
 public:
  explicit PoolAllocator(std::shared_ptr<net::shm::Pool> pool) : pool_(std::move(pool)) {}

  c10::DataPtr allocate(size_t bytes) override {
    if (pool_) {
      if (void* data = pool_->allocate(bytes)) {
        return {data, new Lease{pool_, data}, &release, c10::Device(c10::kCPU)};
      }
    }
    ++fallbacks_;
    return c10::GetCPUAllocator()->allocate(bytes);
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  const std::shared_ptr<net::shm::Pool>& pool() const { return pool_; }
  // Allocations that got ordinary memory: no pool, or no room in it.
  uint64_t fallbacks() const { return fallbacks_.load(); }

 private:
  struct Lease {
    std::shared_ptr<net::shm::Pool> pool;
    void* data;
  };
  // The tensor's storage died: may run on any thread (the pool locks).
  static void release(void* context) {
    auto* lease = static_cast<Lease*>(context);
    lease->pool->release(lease->data);
    delete lease;
  }

  const std::shared_ptr<net::shm::Pool> pool_;
  std::atomic<uint64_t> fallbacks_{0};
};

// Only CPU tensors: c10d passes just the device index (-1 for the CPU; a CUDA device names its
// index), and a CUDA IPC pool is not implemented. A group without a segment has no pool to offer.
bool ProcessGroupXccl::supportsTensorAlloc(c10::DeviceIndex deviceIdx) {
  net::shm::Segment* segment = core_->membership().segment();
  return deviceIdx < 0 && segment != nullptr && segment->pool() != nullptr;
}

std::shared_ptr<c10::Allocator> ProcessGroupXccl::getMemAllocator() {
  std::call_once(allocatorOnce_, [this] {
    net::shm::Segment* segment = core_->membership().segment();
    allocator_ = std::make_shared<PoolAllocator>(segment ? segment->pool() : nullptr);
  });
  return allocator_;
}

at::Tensor ProcessGroupXccl::allocateTensor(long size, at::TensorOptions options) {
  TORCH_CHECK_VALUE(options.device().is_cpu(), "xccl allocateTensor: this group allocates CPU ",
                    "tensors only, not ", options.device().str(),
                    " (a CUDA pool is not implemented)");
  TORCH_CHECK_VALUE(size >= 0, "xccl allocateTensor: negative size ", size);
  TORCH_CHECK_VALUE(!options.has_layout() || options.layout() == c10::kStrided,
                    "xccl allocateTensor: only strided tensors");
  getMemAllocator();
  return at::detail::empty_generic({size}, allocator_.get(),
                                   c10::DispatchKeySet(c10::DispatchKey::CPU),
                                   c10::typeMetaToScalarType(options.dtype()), std::nullopt);
}

std::unordered_map<std::string, uint64_t> ProcessGroupXccl::memoryStats() {
  getMemAllocator();
  std::unordered_map<std::string, uint64_t> stats{{"pool_fallbacks", allocator_->fallbacks()}};
  const net::shm::PoolStats pool =
      allocator_->pool() ? allocator_->pool()->stats() : net::shm::PoolStats{};
  stats["pool_bytes"] = pool.bytes;
  stats["pool_bytes_reserved"] = pool.reserved;
  stats["pool_bytes_in_use"] = pool.inUse;
  stats["pool_allocations"] = pool.allocations;
  stats["pool_full"] = pool.failures;
  // What all_gather and reduce_scatter moved over shared memory: bytes copied into this rank's
  // slots, bytes read in place from pools, and calls whose input was in this rank's pool; and
  // what the single-copy path read.
  net::shm::Traffic none;
  net::shm::Segment* segment = core_->membership().segment();
  const net::shm::Traffic& traffic = segment ? segment->traffic() : none;
  stats["shm_bytes_staged"] = traffic.staged.load();
  stats["shm_bytes_direct"] = traffic.direct.load();
  stats["shm_direct_calls"] = traffic.directCalls.load();
  // Bytes read from peers' memory with process_vm_readv by any collective (docs/shm.md).
  stats["shm_bytes_cma"] = traffic.cma.load();
  return stats;
}

}  // namespace xccl::backend
