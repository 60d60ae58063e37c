#include "net/wait.h"

namespace xccl::net {

void waitForRequests(std::mutex& mutex, std::condition_variable& completed,
                     const std::vector<RequestPtr>& requests, Deadline deadline,
                     const std::string& what) {
  auto allDone = [&] {
    for (const auto& r : requests) {
      if (!r->done()) return false;
    }
    return true;
  };
  {
    std::unique_lock<std::mutex> lock(mutex);
    if (!completed.wait_until(lock, deadline, allDone)) {
      XCCL_THROW(ErrorKind::kTimeout, describeTimeout(requests, what));
    }
  }
  for (const auto& r : requests) {
    try {
      r->rethrowIfFailed();
    } catch (const Error& e) {
      throw Error(e.kind(), what + " failed: " + e.what());
    }
  }
}

}  // namespace xccl::net
