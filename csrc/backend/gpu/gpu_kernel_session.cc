// KernelSession (gpu_kernel_session.h): creating and mapping the workspace, the device handle,
// one kernel-route call, and ending it all at shutdown.
#include "backend/gpu/gpu_kernel_session.h"

#include <c10/util/Exception.h>

#include "backend/core/group_core.h"
#include "backend/core/store_adapter.h"
#include "backend/core/torch_error.h"
#include "backend/gpu/gpu_rules.h"
#include "backend/gpu/gpu_stream.h"
#include "common/env.h"
#include "common/logging.h"
#include "net/rendezvous/bootstrap.h"

namespace xccl::backend {

KernelSession::KernelSession(GpuShared& shared, RouteCounter& counts)
    : shared_(shared), counts_(counts), blockingWait_(env::getBool("XCCL_GPU_BLOCKING_WAIT")) {}

void KernelSession::start() {
  watchdog_ =
      std::make_unique<Watchdog>(shared_.device, shared_.error, shared_.group.sequencer().timeout(),
                                 [this](const std::string& why) { shared_.group.markBroken(why); });
}

void KernelSession::refuseIpc(std::string why) {
  std::lock_guard<std::mutex> guard(shared_.resourceMutex);
  ipcRefused_ = std::move(why);
}

// Created on first use: a collective step, reached by every rank at the same call because every
// rank plans alike (planFor asks before any kernel route is taken). createAgreed gives every rank
// the same outcome: a workspace with every peer mapped, or nullptr when some rank cannot allocate,
// export or map (no peer access, IPC refused): the group then warns once and plans without
// kernels from then on, instead of failing every CUDA collective.
KernelSession::Workspace* KernelSession::workspaceOrNull(const char* op) {
  std::lock_guard<std::mutex> guard(shared_.resourceMutex);
  if (workspace_ || !ipcRefused_.empty()) return workspace_.get();
  TORCH_CHECK(!capturing(shared_.device), "xccl ", op,
              ": the first GPU collective of a group sets up "
              "shared device memory, which cannot happen during CUDA graph "
              "capture; run the collective once before capturing");
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(shared_.device));
  StoreAdapter store(shared_.group.membership().store(), "xccl/");
  std::string whyNot;
  // Counted alike on every rank: a retry after a timeout never reads this attempt's records.
  workspaceAttempt_++;
  try {
    workspace_ = Workspace::createAgreed(store, "gpu_ws", workspaceAttempt_,
                                         shared_.group.membership().rank(),
                                         shared_.group.membership().size(), shared_.device,
                                         shared_.tunables.gpuWorkspaceBytes,
                                         shared_.group.sequencer().timeout(), &whyNot);
  } catch (const Error& e) {
    // A timeout here (some rank never voted) can leave ranks with different outcomes (a rank
    // that saw every vote took the workspace): the group's GPU side is failed, not retried.
    if (e.kind() != ErrorKind::kInvalidArgument) shared_.error->abort();
    throwTorchError(e.kind(), std::string("xccl ") + op + ": " + e.what());
  }
  if (!workspace_) {
    ipcRefused_ = whyNot.empty() ? std::string("no reason given") : whyNot;
    XCCL_WARN("backend", "group '", shared_.group.membership().groupName(),
              "': xccl's GPU kernels are off for this "
              "group, its CUDA collectives use ",
              shared_.placement.ranksPerGpu > 1 ? "host memory" : "NCCL/RCCL", ": ", ipcRefused_);
  }
  return workspace_.get();
}

KernelSession::Workspace& KernelSession::workspace(const char* op) {
  Workspace* ws = workspaceOrNull(op);
  // planFor never takes the kernel route without a workspace.
  TORCH_CHECK(ws != nullptr, "xccl ", op, ": internal error: kernel route without a workspace");
  return *ws;
}

kernels::DeviceHandle KernelSession::handle(Workspace& ws) const {
  kernels::DeviceHandle h{};
  for (int r = 0; r < ws.size(); ++r) {
    h.buffers[r] = ws.data(r);
    h.flags[r] = static_cast<kernels::FlagArea*>(ws.flags(r));
  }
  h.epochs = ws.epochs();
  // The workspace's word in device memory for the kernels' fast check at start, and the group's
  // mapped host word, into which they mirror every failure (read by the host without a copy) and
  // where the host sets the abort bit.
  h.error = ws.error();
  h.hostWord = shared_.error->deviceAlias();
  h.timeoutNs = static_cast<uint64_t>(shared_.group.sequencer().timeout().count()) * 1000000ull;
  h.rank = ws.rank();
  h.worldSize = ws.size();
  return h;
}

void KernelSession::copyIn(Workspace& ws, const void* src, size_t bytes) {
  XCCL_GPU_CHECK(ErrorKind::kSystem,
                 XCCL_RT(MemcpyAsync)(ws.data(ws.rank()), src, bytes, XCCL_RT(MemcpyDeviceToDevice),
                                      shared_.comm.stream()));
}

c10::intrusive_ptr<c10d::Work> KernelSession::runKernel(
    c10d::OpType type, const char* op, std::vector<at::Tensor> keep,
    const std::function<void(Workspace&)>& body) {
  Workspace& ws = workspace(op);
  const bool captured = capturing(shared_.device);
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(shared_.device));
  // One call enqueues at a time: every rank must launch the same kernels in the same order.
  std::lock_guard<std::timed_mutex> issue(shared_.issueMutex);
  shared_.checkHealthy(op);
  if (!captured) inFlight_->prune();
  const gpuStream_t current = currentGpuStream(shared_.device).stream();
  shared_.order->beforeKernel(current, captured);
  // Whatever failed (a runtime call, torch, a check): this rank then launched fewer kernels than
  // its peers, whose epochs no longer match ours, so the group is failed; chunks before the
  // failing one may be queued: tracked like a whole call (their tensors stay referenced, later
  // calls and a capture's join follow them), or kept for good when even that fails.
  const auto failCall = [&] {
    shared_.error->abort();
    try {
      std::shared_ptr<CudaEvent> queued = shared_.order->afterKernel(current, captured);
      if (!captured) inFlight_->add(queued, keep);
    } catch (const std::exception& e) {
      XCCL_WARN("backend", "xccl ", op, ": tensors of a failed call kept: ", e.what());
      (void)new std::vector<at::Tensor>(keep);
    }
  };
  try {
    rules::failOnThrow([&] { body(ws); }, failCall);
  } catch (const Error& e) {
    throwTorchError(e.kind(), std::string("xccl ") + op + ": " + e.what());
  }
  std::shared_ptr<CudaEvent> done = shared_.order->afterKernel(current, captured);
  counts_.count(algo::GpuRoute::kKernel);
  // A captured call's tensors belong to the graph's memory pool; nothing to keep. Nor can its
  // events be queried: nothing to watch, its future is completed at issue.
  if (!captured) inFlight_->add(done, keep);
  auto work = c10::make_intrusive<GpuWork>(shared_.group.membership().rank(), type, op,
                                           shared_.comm.unwrap(), done, captured,
                                           std::vector<at::Tensor>{keep.front()}, shared_.error,
                                           blockingWait_
                                               ? std::optional(shared_.group.sequencer().timeout())
                                               : std::nullopt,
                                           /*watched=*/!captured);
  if (!captured) {
    watchdog_->watch(work, done,
                     std::string(op) + " (kernel call " + std::to_string(++kernelCalls_) + ", " +
                         std::to_string(keep.front().nbytes()) + " bytes)");
  }
  return work;
}

bool KernelSession::drainComm(std::chrono::steady_clock::time_point deadline) {
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(shared_.device));
  // Graph replays run on the replaying stream, not on the comm stream: the drain waits for them
  // too, or the workspace could be freed under a replayed kernel.
  shared_.order->commWaitsReplays();
  std::shared_ptr<CudaEvent> tail = shared_.events->take();
  XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(EventRecord)(tail->get(), shared_.comm.stream()));
  using Clock = std::chrono::steady_clock;
  const Clock::time_point halfway = Clock::now() + (deadline - Clock::now()) / 2;
  // Healthy kernels get half the time; then the abort bit makes spinning ones return at their
  // next poll. A failed group, or a peer the transport saw fail (its connection closed: it died
  // or aborted), can never release them: abort at once rather than wait out the group timeout.
  bool aborted = false;
  for (;;) {
    if (!aborted && (shared_.error->read() != 0 || Clock::now() >= halfway ||
                     shared_.group.membership().somePeerFailed())) {
      shared_.error->abort();
      aborted = true;
    }
    if (tail->pollUntil(std::min(deadline, Clock::now() + std::chrono::milliseconds(50)))) {
      return true;
    }
    if (Clock::now() >= deadline) return false;
  }
}

void KernelSession::shutdown(std::chrono::steady_clock::time_point deadline) {
  std::lock_guard<std::mutex> guard(shared_.resourceMutex);
  if (!workspace_) return;
  // Peers may still read this rank's buffer until they finished their last kernel: wait for our
  // own kernels, then for every rank to say so, before freeing (net/regions/cuda_ipc/workspace.h).
  // Bounded (drainComm): a peer that died would otherwise hold our kernels for the group timeout.
  bool drained = false;
  try {
    drained = drainComm(deadline);
  } catch (const std::exception& e) {
    XCCL_WARN("backend", "GPU shutdown: ", e.what());
  }
  bool everyoneDone = false;
  if (drained) {
    try {
      StoreAdapter store(shared_.group.membership().store(), "xccl/");
      const std::string key = "gpu_ws/" + std::to_string(workspaceAttempt_) + "/done";
      const auto left =
          rules::doneAgreementWait(shared_.error->read() != 0 ||
                                       shared_.group.membership().somePeerFailed(),
                                   std::chrono::duration_cast<std::chrono::milliseconds>(
                                       deadline - std::chrono::steady_clock::now()));
      net::Bootstrap(store, "", shared_.group.membership().rank(),
                     shared_.group.membership().size(), left)
          .allGather(key, net::toBytes("1"));
      everyoneDone = true;
    } catch (const std::exception& e) {
      XCCL_WARN("backend", "GPU workspace kept until the process exits: ", e.what());
    }
  }
  // Settles what the drain saw complete; what it gave up on fails.
  watchdog_->stop();
  if (!drained) {
    XCCL_WARN("backend", "GPU kernels still running at shutdown: the workspace, the error word "
                         "and the tensors of calls in flight are kept until the process exits");
    // Kernels still write the error word and the tensors of their calls: never free them under
    // a kernel.
    (void)new std::shared_ptr<ErrorWord>(shared_.error);
    (void)inFlight_.release();
  }
  if (everyoneDone) {
    workspace_.reset();
  } else {
    (void)workspace_.release();  // a peer may still map it: never free under it
  }
}

}  // namespace xccl::backend
