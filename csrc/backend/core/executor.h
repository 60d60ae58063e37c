// Runs a group's collectives in submission order on one worker thread (so async collectives
// do not block the caller), or on the caller's thread when nothing is queued or running (so a
// synchronous collective pays no thread hand-off). Also finishes point-to-point Works on a
// completion thread, off the transport's progress thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace xccl::backend {

class Executor {
 public:
  Executor();
  ~Executor();  // stopWorker(), then runs the queued completions and joins
  // Runs what is queued, then joins the worker; later submits run inline. Call before tearing
  // down what tasks use.
  void stopWorker();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Runs `task` after every earlier task; inline on this thread if `mayRunInline` and the
  // executor is idle. Tasks must not throw (they report through their Work).
  void submit(std::function<void()> task, bool mayRunInline);
  // Queues `callback` for the completion thread. Never blocks: safe to call with a
  // transport lock held.
  void complete(std::function<void()> callback);

 private:
  void workerLoop();
  void completionLoop();

  std::mutex mutex_;
  // Separate wake-ups: a synchronous collective run inline must not wake (context-switch to)
  // the idle worker or completion thread, which on a 2-vCPU VM cost ~100 us per collective.
  std::condition_variable workChanged_;         // the worker: a task queued, or stopping
  std::condition_variable completionsChanged_;  // the completion thread
  std::deque<std::function<void()>> tasks_;
  std::deque<std::function<void()>> completions_;
  bool busy_ = false;  // a task is running (on the worker or inline)
  bool stopping_ = false;       // the worker drains and exits
  bool stoppingCompletions_ = false;
  std::thread worker_;
  std::thread completer_;
};

}  // namespace xccl::backend
