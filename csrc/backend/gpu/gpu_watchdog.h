// The watchdog of a group's kernel-route calls (docs/gpu.md, "Errors"), as ProcessGroupNCCL's
// watchdog thread is for its collectives: wait() only makes the caller's stream wait, so some
// thread must find out whether each call succeeded, and settle its Work and future.
//
// One thread per GPU side, started by the first watched call, joined by stop(). It sleeps on a
// condition variable while no call is outstanding; with one, it queries the oldest call's event
// with sleeps from 20 us doubling to 1 ms (reset for each call), and reads the error word once
// the event completed or the call ran past the group timeout (the decisions are
// rules::judgeCall and rules::WatchList, tested on CPU). A sleeping poll rather than
// cudaEventSynchronize on blocking-sync events: a synchronize cannot be bounded, and the thread
// must notice a timeout (a call stuck behind the caller's stream, which the kernels' own device
// timeout does not cover) and return at shutdown whatever the device does. The sleeps cost a
// future at most about its call's duration again (the doubling) or 1 ms; wait() does not use
// them unless it blocks. Its queries run in the thread-local capture mode (CudaEvent::query), so
// a CUDA graph another thread captures meanwhile is neither refused nor broken by them.
//
// A completed call with a clear word: its Work completes and its future too (recorded on the
// watchdog's own idle stream, so a consumer waits on nothing else). A set word or a timeout:
// the abort bit is set (spinning kernels return), the group is failed through `onFailure` (the
// GroupCore failure path) naming the call, and the call and every later outstanding one are
// settled failed: their wait(), is_completed() and futures raise.
#pragma once

#include <c10/core/Stream.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "backend/gpu/gpu_error.h"
#include "backend/gpu/gpu_rules.h"
#include "backend/gpu/gpu_work.h"
#include "common/gpu_runtime.h"

namespace xccl::backend {

class Watchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // `onFailure(reason)` fails the group; it must not throw nor call back into the watchdog.
  Watchdog(int device, std::shared_ptr<ErrorWord> error, std::chrono::milliseconds timeout,
           std::function<void(const std::string&)> onFailure);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Watches `work`, whose `done` event was just recorded; `what` names the call in errors
  // ("allreduce (kernel call 7, 4096 bytes)"). After a failure, or once stopped, it is settled
  // failed at once.
  void watch(c10::intrusive_ptr<GpuWork> work, std::shared_ptr<CudaEvent> done, std::string what);
  // Joins the thread after a last look at each outstanding call (KernelSession::shutdown, after the
  // comm stream drained or was given up on): one not completed by then is settled failed.
  void stop();

 private:
  struct Call {
    c10::intrusive_ptr<GpuWork> work;
    std::shared_ptr<CudaEvent> done;
    std::string what;
    Clock::time_point issued;
  };
  void start();  // with mutex_ held
  void run();
  // The verdict on `call`, never throwing: a failed event query counts as the call's failure.
  rules::CallVerdict judge(const Call& call, std::string* why);
  // Settles `calls` as `verdict` says; a failure also fails the group when `failGroup`.
  void settle(std::deque<Call> calls, rules::CallVerdict verdict, const std::string& why,
              bool failGroup);

  const int device_;
  const std::shared_ptr<ErrorWord> error_;
  const std::chrono::milliseconds timeout_;
  const std::function<void(const std::string&)> onFailure_;
  std::mutex mutex_;
  std::condition_variable changed_;
  rules::WatchList<Call> calls_;  // under mutex_
  bool stopping_ = false;  // under mutex_
  std::thread thread_;  // started by the first watch()
  std::optional<c10::Stream> completions_;  // the futures' stream, created with the thread
  gpuStream_t completionsStream_ = nullptr;  // the same, destroyed with the watchdog
};

}  // namespace xccl::backend
