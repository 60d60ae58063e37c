// AbortHooks: what runs before a group fails (ProcessGroupXccl's registerAbortHook, e.g. a
// framework flushing its state), each hook at most once. One of GroupCore's parts
// (group_core.h); no torch, so that it is tested alone (tests/cpp/backend).
//
// Threads: every method may be called from any thread. runOnce() runs the hooks outside the lock,
// so a hook may add or remove hooks (those added run at the next runOnce()).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace xccl::backend {

class AbortHooks {
 public:
  // Replaces the hook registered under `hookId`, if any.
  void add(int64_t hookId, std::function<void()> hook);
  void remove(int64_t hookId);
  // Runs every registered hook in id order and forgets it, so that each runs at most once.
  // A hook's exception is logged, never propagated: the failure that runs them goes on.
  void runOnce();

 private:
  std::mutex mutex_;
  std::map<int64_t, std::function<void()>> hooks_;
};

}  // namespace xccl::backend
