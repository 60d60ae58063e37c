// Completion events of the GPU side, and the tensors they keep alive (gpu_path.h).
//
// Every kernel-route call needs one event that outlives the call (its Work waits on it, the
// in-flight list polls it). Creating and destroying one per call costs two driver calls on the
// latency path; the pool hands out events that went back to it when their last holder let go.
#pragma once

#include <ATen/ATen.h>

#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/gpu/gpu_work.h"

namespace xccl::backend {

class EventPool : public std::enable_shared_from_this<EventPool> {
 public:
  // Events are created on `device` (CUDA events belong to the device current at creation).
  static std::shared_ptr<EventPool> create(int device);
  ~EventPool();

  // An event no one else holds: recorded anew by the caller before anyone waits on or queries
  // it (a wait captures the record at the time of the wait call, so an earlier waiter does not
  // care that the event is recorded again). Back in the pool when the last copy is dropped;
  // destroyed then instead if the pool is gone or holds kMaxIdle already.
  std::shared_ptr<CudaEvent> take();

 private:
  explicit EventPool(int device) : device_(device) {}
  void giveBack(CudaEvent* event);

  static constexpr size_t kMaxIdle = 64;
  const int device_;
  std::mutex mutex_;
  std::vector<CudaEvent*> idle_;  // owned
};

// Tensors (inputs and outputs) of kernel-route collectives whose completion event has not been
// seen yet: they stay referenced here whatever the caller does with the Work, so the caching
// allocator cannot hand their memory to other work while the comm stream still uses it.
// Never used during graph capture (events recorded in a capture cannot be queried).
class InFlight {
 public:
  void add(std::shared_ptr<CudaEvent> done, std::vector<at::Tensor> tensors);
  // Drops the entries whose event completed, oldest first.
  void prune();
  bool empty();

 private:
  struct Entry {
    std::shared_ptr<CudaEvent> done;
    std::vector<at::Tensor> tensors;
  };
  std::mutex mutex_;
  std::deque<Entry> entries_;  // in comm-stream order: the first not done blocks the rest
};

}  // namespace xccl::backend
