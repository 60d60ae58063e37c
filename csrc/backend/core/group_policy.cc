// GroupPolicy's answers where a callback is missing (group_policy.h): what C++ without the
// Python package does.
#include "backend/core/group_policy.h"

#include <exception>

namespace xccl::backend {

c10::intrusive_ptr<c10d::Backend> GroupPolicy::makeVendorGroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, const std::string& groupName) const {
  if (!vendorFactory) return {};
  return vendorFactory(store, rank, size, timeout, groupName);
}

KernelCheckResult GroupPolicy::checkKernels() const {
  if (!kernelCheck) return {false, "no verification check registered (xccl's Python package)"};
  return kernelCheck();
}

algo::TuningAnswer GroupPolicy::askTuning() const {
  if (!tuningSource) return {"", "no tuning source registered (xccl's Python package)"};
  try {
    return tuningSource();
  } catch (const std::exception& e) {
    return {"", std::string("the tuning source failed: ") + e.what()};
  }
}

}  // namespace xccl::backend
