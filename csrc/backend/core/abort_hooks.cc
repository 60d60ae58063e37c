#include "backend/core/abort_hooks.h"

#include <exception>
#include <utility>

#include "common/logging.h"

namespace xccl::backend {

void AbortHooks::add(int64_t hookId, std::function<void()> hook) {
  std::lock_guard<std::mutex> guard(mutex_);
  hooks_[hookId] = std::move(hook);
}

void AbortHooks::remove(int64_t hookId) {
  std::lock_guard<std::mutex> guard(mutex_);
  hooks_.erase(hookId);
}

void AbortHooks::runOnce() {
  std::map<int64_t, std::function<void()>> hooks;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    hooks.swap(hooks_);  // each hook runs at most once
  }
  for (auto& [id, hook] : hooks) {
    try {
      hook();
    } catch (const std::exception& e) {
      XCCL_WARN("backend", "abort hook ", id, " raised (ignored): ", e.what());
    } catch (...) {
      XCCL_WARN("backend", "abort hook ", id, " raised a non-standard exception (ignored)");
    }
  }
}

}  // namespace xccl::backend
