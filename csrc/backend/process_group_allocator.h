// TensorAllocator: the tensors the backend allocates (c10d's supportsTensorAlloc /
// allocateTensor / getMemAllocator, which FSDP2 calls for its communication buffers once
// set_allocate_memory_from_process_group_for_comm(True)) and the memory statistics
// (getMemoryStats). CPU tensors come from this rank's pool of the group's shared-memory segment
// (net/regions/shm/pool.h), which the shm all_gather and reduce_scatter read in place; ordinary
// memory when the pool is absent or full. docs/training.md, docs/shm.md ("Tensors in the pool").
//
// One reason to change: where the group's tensors come from. Threads: any; the allocator is made
// once (allocatorOnce_), on first use, and never replaced.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backend/core/group_core.h"

namespace xccl::backend {

class PoolAllocator;  // process_group_allocator.cc

class TensorAllocator {
 public:
  // Reads the segment of `core`'s membership, which must outlive this.
  explicit TensorAllocator(GroupCore& core) : core_(core) {}
  TensorAllocator(const TensorAllocator&) = delete;
  TensorAllocator& operator=(const TensorAllocator&) = delete;

  // Whether tensors on `deviceIdx` come from the pool: only CPU ones, with a pool to offer.
  bool supports(c10::DeviceIndex deviceIdx);
  // The c10::Allocator behind allocate(), made on first use from the membership's pool then.
  std::shared_ptr<c10::Allocator> get();
  // A CPU tensor of `size` elements from the pool (ordinary memory when it has no room); a
  // ValueError for other devices, negative sizes and layouts other than strided.
  at::Tensor allocate(long size, at::TensorOptions options);
  // Pool use, fallbacks, and bytes staged vs read in place by the shared-memory collectives.
  std::unordered_map<std::string, uint64_t> stats();

 private:
  GroupCore& core_;
  std::once_flag allocatorOnce_;
  std::shared_ptr<PoolAllocator> allocator_;  // get(), made on first use
};

}  // namespace xccl::backend
