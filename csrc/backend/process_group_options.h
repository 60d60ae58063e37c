// ProcessGroupXccl::Options (python: xccl.Options): what a group is created with. Declared apart
// from the face so that its parts (process_group_lifecycle.h, process_group_children.h), which
// the face holds by value, can read and copy the options without the face's definition.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <memory>
#include <string>

#include "backend/core/compat.h"
#include "backend/core/group_policy.h"

namespace xccl::backend {

struct GroupOptions : c10d::Backend::Options {
  GroupOptions() : c10d::Backend::Options("xccl") {}
  // Overrides XCCL_ALGO for this group: "" (use XCCL_ALGO), auto, direct, ring.
  std::string algorithm;
  // Address whose route picks the interface to listen on (the store's host).
  std::string storeHost;
  // What the group calls back into its creator for (core/group_policy.h); null: none.
  // split() and shrink() give a child without one its parent's.
  std::shared_ptr<const GroupPolicy> policy;
#if XCCL_TORCH_HAS_OPTIONS_CLONE
  c10::intrusive_ptr<c10d::Backend::Options> clone() const override {
    return c10::make_intrusive<GroupOptions>(*this);
  }
#endif
};

}  // namespace xccl::backend
