#include "backend/gpu/gpu_events.h"
#include "backend/gpu/gpu_stream.h"

namespace xccl::backend {

std::shared_ptr<EventPool> EventPool::create(int device) {
  return std::shared_ptr<EventPool>(new EventPool(device));
}

EventPool::~EventPool() {
  for (CudaEvent* event : idle_) delete event;
}

std::shared_ptr<CudaEvent> EventPool::take() {
  CudaEvent* event = nullptr;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!idle_.empty()) {
      event = idle_.back();
      idle_.pop_back();
    }
  }
  if (event == nullptr) {
    GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
    event = new CudaEvent();
  }
  // The deleter holds the pool weakly: Works may outlive the group and its pool.
  std::weak_ptr<EventPool> pool = weak_from_this();
  return std::shared_ptr<CudaEvent>(event, [pool](CudaEvent* e) {
    if (auto owner = pool.lock()) {
      owner->giveBack(e);
    } else {
      delete e;
    }
  });
}

void EventPool::giveBack(CudaEvent* event) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (idle_.size() < kMaxIdle) {
      idle_.push_back(event);
      return;
    }
  }
  delete event;
}

void InFlight::add(std::shared_ptr<CudaEvent> done, std::vector<at::Tensor> tensors) {
  std::lock_guard<std::mutex> guard(mutex_);
  entries_.push_back({std::move(done), std::move(tensors)});
}

void InFlight::prune() {
  std::lock_guard<std::mutex> guard(mutex_);
  while (!entries_.empty() && entries_.front().done->query()) entries_.pop_front();
}

bool InFlight::empty() {
  std::lock_guard<std::mutex> guard(mutex_);
  return entries_.empty();
}

}  // namespace xccl::backend
