// ProcessGroupXccl's construction: the core first, then its parts (process_group.h), then the
// group's creation (MembershipLifecycle::create), and what only the face can do: c10d's init()
// and, at reconfigure, its rank and size.
#include "backend/process_group.h"

#include <c10/util/Exception.h>

namespace xccl::backend {
namespace {

// Checked before anything reads the options (the core is built from them).
c10::intrusive_ptr<GroupOptions> checked(c10::intrusive_ptr<GroupOptions> options) {
  TORCH_CHECK_VALUE(options, "xccl: options must not be None");
  return options;
}

}  // namespace

ProcessGroupXccl::ProcessGroupXccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   c10::intrusive_ptr<Options> options)
    : c10d::Backend(rank, size),
      options_(checked(std::move(options))),
      core_(std::make_unique<GroupCore>(*this, options_, store, rank, size, options_->policy)),
      sides_(*core_),
      lifecycle_(*core_, sides_, options_),
      children_(*core_, lifecycle_, options_),
      allocator_(*core_) {
  TORCH_CHECK_VALUE(size >= 1 && rank >= 0 && rank < size, "xccl: bad rank ", rank,
                    " for group size ", size);
  lifecycle_.create(store, rank, size);
  core_->recorder().describe();  // a dump names this rank's file even before its first operation
  init();
  lifecycle_.announce(rank, size);
}

#if XCCL_TORCH_HAS_RECONFIGURE
c10::intrusive_ptr<c10d::Work> ProcessGroupXccl::reconfigure(const c10d::ReconfigureOptions& opts) {
  // c10d::Backend's rank and size are the face's own: the lifecycle hands them back to set.
  return lifecycle_.reconfigure(opts, [this](int rank, int size) {
    rank_ = rank;
    size_ = size;
  });
}
#endif

}  // namespace xccl::backend
