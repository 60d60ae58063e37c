#include "backend/core/executor.h"

#include "common/wait_slice.h"

namespace xccl::backend {

Executor::Executor() {
  // Both sleep until the caller (or a transport) wakes them: short slices (wait_slice.h).
  worker_ = std::thread([this] {
    wait_slice::keepShort();
    workerLoop();
  });
  completer_ = std::thread([this] {
    wait_slice::keepShort();
    completionLoop();
  });
}

Executor::~Executor() {
  stopWorker();
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stoppingCompletions_ = true;
  }
  completionsChanged_.notify_all();
  completer_.join();
}

void Executor::stopWorker() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  workChanged_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void Executor::submit(std::function<void()> task, bool mayRunInline) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!((mayRunInline || stopping_) && !busy_ && tasks_.empty())) {
    tasks_.push_back(std::move(task));
    workChanged_.notify_all();
    return;
  }
  busy_ = true;
  lock.unlock();
  task();
  lock.lock();
  busy_ = false;
  // Only tasks queued meanwhile need the worker; otherwise nobody waits for this.
  if (!tasks_.empty()) workChanged_.notify_all();
}

void Executor::complete(std::function<void()> callback) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    completions_.push_back(std::move(callback));
  }
  completionsChanged_.notify_all();
}

void Executor::workerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    workChanged_.wait(lock,
                      [&] { return (!busy_ && !tasks_.empty()) || (stopping_ && tasks_.empty()); });
    if (tasks_.empty()) return;  // stopping and drained
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    busy_ = true;
    lock.unlock();
    task();
    lock.lock();
    busy_ = false;
  }
}

void Executor::completionLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    completionsChanged_.wait(lock, [&] { return !completions_.empty() || stoppingCompletions_; });
    if (completions_.empty()) return;
    auto callback = std::move(completions_.front());
    completions_.pop_front();
    lock.unlock();
    callback();
    lock.lock();
  }
}

}  // namespace xccl::backend
