#include "backend/gpu/gpu_order.h"

namespace xccl::backend {

StreamOrder::StreamOrder(GpuStream comm, std::shared_ptr<EventPool> pool)
    : comm_(comm), pool_(std::move(pool)) {}

void StreamOrder::crossCaptureBoundary(bool captured) {
  if (captured == lastCaptured_) return;
  lastCaptured_ = captured;
  // Into a capture: the device was idle when it began (torch.cuda.graph synchronises), and a
  // capture may not wait on events recorded outside it. Out of one: the captured events belong
  // to the graph and cannot be waited on or queried eagerly.
  lastKernel_.reset();
  pendingVendor_.clear();
}

bool StreamOrder::kernelPending() {
  if (lastKernel_ && lastKernel_->query()) lastKernel_.reset();  // done: nothing to wait for
  return lastKernel_ != nullptr;
}

void StreamOrder::beforeKernel(gpuStream_t current, bool captured) {
  crossCaptureBoundary(captured);
  const rules::OrderSteps steps =
      rules::orderBefore(rules::Route::kKernel, false, !pendingVendor_.empty());
  if (steps.commWaitsVendor) {
    // WorkNCCL::synchronize makes the *current* stream wait on NCCL's end event and then lets
    // NCCL drop its references to the call's tensors, so it must run with the caller's stream
    // current (the GPU side guards the device; the stream is the caller's): with the comm stream
    // current NCCL would release tensors that the caller's stream never waited for. The comm
    // stream then follows through the caller's stream, just below.
    for (const auto& work : pendingVendor_.takeAll()) work->synchronize();
  }
  XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(EventRecord)(ready_.get(), current));
  XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(StreamWaitEvent)(comm_.stream(), ready_.get(), 0));
  if (captured) {
    // At each replay: after the eager kernel-route calls issued before the replay. Without
    // external nodes the replay follows them only through the stream it is launched on
    // (kGpuGraphExternalEvents; the rule in docs/gpu.md, "CUDA graphs").
    if (kGpuGraphExternalEvents) {
      XCCL_GPU_CHECK(ErrorKind::kSystem,
                     gpuStreamWaitEventExternal(comm_.stream(), eagerTail_.get()));
    }
  } else {
    // After the replays launched before this call (a no-op while no graph was replayed).
    XCCL_GPU_CHECK(ErrorKind::kSystem,
                   XCCL_RT(StreamWaitEvent)(comm_.stream(), graphTail_.get(), 0));
  }
}

std::shared_ptr<CudaEvent> StreamOrder::afterKernel(gpuStream_t current, bool captured) {
  std::shared_ptr<CudaEvent> done = pool_->take();
  if (captured) {
    // The external record first: `done`, which the capturing stream joins, must come after every
    // node the call added to the comm stream, or the capture ends with an unjoined node.
    if (kGpuGraphExternalEvents) {
      XCCL_GPU_CHECK(ErrorKind::kSystem, gpuEventRecordExternal(graphTail_.get(), comm_.stream()));
    }
    XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(EventRecord)(done->get(), comm_.stream()));
    XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(StreamWaitEvent)(current, done->get(), 0));
  } else {
    XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(EventRecord)(done->get(), comm_.stream()));
    XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(EventRecord)(eagerTail_.get(), comm_.stream()));
    lastKernel_ = done;
  }
  return done;
}

void StreamOrder::beforeVendor(gpuStream_t current, bool captured) {
  crossCaptureBoundary(captured);
  // Under capture lastKernel_ is empty: a captured kernel call already joined the caller's stream.
  const rules::OrderSteps steps =
      rules::orderBefore(rules::Route::kVendor, kernelPending(), !pendingVendor_.empty());
  if (steps.currentWaitsKernel) {
    XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(StreamWaitEvent)(current, lastKernel_->get(), 0));
  }
}

void StreamOrder::afterVendor(c10::intrusive_ptr<c10d::Work> work, bool captured) {
  // Eager: the completed ones need no wait. A Work whose query throws (failed) stays, so that
  // its synchronize() reports it.
  if (!captured) {
    pendingVendor_.prune([](const c10::intrusive_ptr<c10d::Work>& w) {
      try {
        return w->isCompleted();
      } catch (const std::exception&) {
        return false;
      }
    });
  }
  pendingVendor_.add(std::move(work));
}

void StreamOrder::beforeCurrentStream(gpuStream_t current, bool captured) {
  crossCaptureBoundary(captured);
  const rules::OrderSteps steps =
      rules::orderBefore(rules::Route::kHost, kernelPending(), !pendingVendor_.empty());
  if (steps.currentWaitsKernel) {
    XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(StreamWaitEvent)(current, lastKernel_->get(), 0));
  }
  if (steps.currentWaitsVendor) {
    // With the caller's stream current (the GPU side guards the device; the stream is the current
    // one). Kept pending: the comm stream has not waited on it, and a later kernel-route call
    // may come from another stream.
    for (const auto& work : pendingVendor_.all()) work->synchronize();
  }
}

void StreamOrder::commWaitsReplays() {
  // graphTail_ is recorded by the external record nodes of captured calls at every replay; the
  // same wait every eager kernel-route call makes (beforeKernel). Without external nodes it is
  // never recorded and this waits for nothing: replays are the replaying stream's to finish.
  XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(StreamWaitEvent)(comm_.stream(), graphTail_.get(), 0));
}

}  // namespace xccl::backend
