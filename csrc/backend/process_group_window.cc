// ProcessGroupXccl::new_window: torch's one-sided windows on this group (window.h).
#include "backend/process_group.h"
#include "backend/window/window.h"

#if XCCL_TORCH_HAS_WINDOW

namespace xccl::backend {

c10::intrusive_ptr<c10d::Window> ProcessGroupXccl::new_window(
    const std::optional<at::Tensor>& tensor) {
  core_->checkUsable("new_window");
  // Every rank creates windows in the same order, so the count names one window alike on all.
  auto window = c10::make_intrusive<XcclWindow>(
      c10::intrusive_ptr<c10d::Backend>::unsafe_reclaim_from_nonowning(this), *core_,
      core_->membership().nextWindowId());
  if (tensor) window->tensor_register(*tensor);
  return window;
}

}  // namespace xccl::backend

#endif  // XCCL_TORCH_HAS_WINDOW
