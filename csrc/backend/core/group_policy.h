// GroupPolicy: what a group asks of whoever created it, beyond its options. The Python package
// builds one (python/xccl/_registration.py: the vendor group's factory, verify.py's kernel check,
// tuning.py's source) and hands it to every group it creates, through
// ProcessGroupXccl.Options.policy; split() and shrink() pass the parent's on to their children,
// and a reconfigured group keeps its own. Each group reads only its own policy: there is no
// process-wide slot to register a callback in.
//
// An empty callback answers as C++ without the Python package does: no vendor group, kernels not
// verified, no tuning table. A group created from C++ alone (options without a policy) gets a
// policy with none.
//
// Every callback may be called on any thread that creates a membership or a GPU side (the
// thread that called the group's constructor, reconfigure() or the first CUDA collective), with
// or without the GIL: one that calls Python takes the GIL itself (module_policy.cc's do). What
// each may throw: the vendor factory's exception reaches the CUDA call that needed the vendor
// group (NCCL failing to start is that call's error); the kernel check must not throw
// (module_policy.cc's catches what Python raises and answers "not verified"); the tuning source
// may, and askTuning() turns that into "no table", since a table must never fail a group.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <string>

#include "algo/tuning_agree.h"

namespace xccl::backend {

// Whether xccl's GPU kernels were verified on this machine, and why.
struct KernelCheckResult {
  bool verified = false;
  std::string why;
};

struct GroupPolicy {
  // The inner vendor-library group (NCCL/RCCL) of a GPU side, built from the group's store
  // (already prefixed for it), rank, size, timeout and name; a null Backend when this torch has
  // no vendor library. Called at most once per GPU side, when its vendor route is first possible
  // (gpu/gpu_vendor_route.cc).
  using VendorFactory = std::function<c10::intrusive_ptr<c10d::Backend>(
      const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      std::chrono::milliseconds timeout, const std::string& groupName)>;
  // Whether the kernels were verified here (python/xccl/verify.py): asked once per GPU side's
  // creation on every rank; the group takes rank 0's answer (gpu/gpu_verify.cc).
  using KernelCheck = std::function<KernelCheckResult()>;
  // This rank's tuning table (python/xccl/tuning.py's source(): text "" is none, and why): asked
  // on every rank at each membership's creation; the group takes rank 0's answer
  // (group_core_tuning.cc).
  using TuningSource = std::function<algo::TuningAnswer()>;

  VendorFactory vendorFactory;
  KernelCheck kernelCheck;
  TuningSource tuningSource;

  // The callbacks' answers, or the empty policy's where one is missing or throws.
  c10::intrusive_ptr<c10d::Backend> makeVendorGroup(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout,
                                                    const std::string& groupName) const;
  KernelCheckResult checkKernels() const;
  algo::TuningAnswer askTuning() const;
};

}  // namespace xccl::backend
