// GpuPath: the workspace session: creating and mapping the workspace, the device handle, one
// kernel-route call, and ending it all (shutdown, abort). gpu_path.h says which file holds what.
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include "backend/gpu_path.h"
#include "backend/process_group.h"
#include "backend/store_adapter.h"
#include "common/logging.h"

namespace xccl::backend {

bool capturing() {
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
}

// Created on first use: a collective step, reached by every rank at the same call because every
// rank plans alike.
GpuPath::Workspace& GpuPath::workspace(const char* op) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!workspace_) {
    TORCH_CHECK(!capturing(), "xccl ", op, ": the first GPU collective of a group sets up "
                              "shared device memory, which cannot happen during CUDA graph "
                              "capture; run the collective once before capturing");
    c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
    StoreAdapter store(group_.store(), "xccl/");
    workspace_ = createWorkspace(store, op);
    mapEveryPeer(store, op);
  }
  return *workspace_;
}

std::unique_ptr<GpuPath::Workspace> GpuPath::createWorkspace(net::Store& store, const char* op) {
  try {
    return Workspace::create(store, "gpu_ws", group_.getRank(), group_.getSize(), device_,
                             workspaceBytes(), group_.timeout());
  } catch (const Error& e) {
    C10_THROW_ERROR(DistBackendError, std::string("xccl ") + op + ": " + e.what());
  }
}

// Maps every peer's buffer now and agrees on the outcome: a rank that cannot map a peer must not
// leave the others spinning in their first kernel until the timeout.
void GpuPath::mapEveryPeer(net::Store& store, const char* op) {
  std::string failure;
  try {
    for (int r = 0; r < workspace_->size(); ++r) workspace_->base(r);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  auto outcomes = net::allGatherThroughStore(store, "gpu_ws_mapped", group_.getRank(),
                                             group_.getSize(), net::toBytes(failure),
                                             group_.timeout());
  for (size_t r = 0; r < outcomes.size(); ++r) {
    if (outcomes[r].empty()) continue;
    workspace_.reset();
    C10_THROW_ERROR(DistBackendError, std::string("xccl ") + op + ": rank " +
                                          std::to_string(r) + " cannot map its peers' GPU "
                                          "memory: " + net::toString(outcomes[r]));
  }
}

kernels::DeviceHandle GpuPath::handle(Workspace& ws) const {
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
  h.hostWord = error_->deviceAlias();
  h.timeoutNs = static_cast<uint64_t>(group_.timeout().count()) * 1000000ull;
  h.rank = ws.rank();
  h.worldSize = ws.size();
  return h;
}

void GpuPath::copyIn(Workspace& ws, const void* src, size_t bytes) {
  checkCuda(cudaMemcpyAsync(ws.data(ws.rank()), src, bytes, cudaMemcpyDeviceToDevice,
                            comm_.stream()),
            "cudaMemcpyAsync");
}

c10::intrusive_ptr<c10d::Work> GpuPath::runKernel(c10d::OpType type, const char* op,
                                                  std::vector<at::Tensor> keep,
                                                  const std::function<void(Workspace&)>& body) {
  Workspace& ws = workspace(op);
  const bool captured = capturing();
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  // One call enqueues at a time: every rank must launch the same kernels in the same order.
  std::lock_guard<std::mutex> issue(issueMutex_);
  checkHealthy(op);
  if (!captured) inFlight_.prune();
  const cudaStream_t current = c10::cuda::getCurrentCUDAStream(device_).stream();
  order_->beforeKernel(current, captured);
  try {
    body(ws);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kInvalidArgument) {
      TORCH_CHECK_VALUE(false, "xccl ", op, ": ", e.what());
    }
    C10_THROW_ERROR(DistBackendError, std::string("xccl ") + op + ": " + e.what());
  }
  std::shared_ptr<CudaEvent> done = order_->afterKernel(current, captured);
  // A captured call's tensors belong to the graph's memory pool; nothing to keep.
  if (!captured) inFlight_.add(done, keep);
  return c10::make_intrusive<GpuWork>(group_.getRank(), type, op, comm_.unwrap(), done, captured,
                                      std::vector<at::Tensor>{keep.front()}, error_);
}

bool GpuPath::drainComm(std::chrono::milliseconds timeout, bool abortFirst) {
  if (abortFirst) error_->abort();
  c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  std::shared_ptr<CudaEvent> tail = events_->take();
  checkCuda(cudaEventRecord(tail->get(), comm_.stream()), "cudaEventRecord");
  return tail->pollUntil(std::chrono::steady_clock::now() + timeout);
}

void GpuPath::shutdown(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> issue(issueMutex_);
  std::lock_guard<std::mutex> guard(mutex_);
  if (!workspace_) return;
  // Peers may still read this rank's buffer until they finished their last kernel: wait for our
  // own kernels, then for every rank to say so, before freeing (net/cuda_ipc/workspace.h).
  // Bounded: healthy kernels get half the time; then the abort bit makes spinning ones return
  // at their next poll (a peer that died would otherwise hold them for the group timeout).
  bool drained = false;
  try {
    const bool failed = error_->read() != 0;
    drained = (!failed && drainComm(timeout / 2, false)) || drainComm(timeout / 2, true);
  } catch (const std::exception& e) {
    XCCL_WARN("backend", "GPU shutdown: ", e.what());
  }
  bool everyoneDone = false;
  if (drained) {
    try {
      StoreAdapter store(group_.store(), "xccl/");
      net::allGatherThroughStore(store, "gpu_ws_done", group_.getRank(), group_.getSize(),
                                 net::toBytes("1"), timeout);
      everyoneDone = true;
    } catch (const std::exception& e) {
      XCCL_WARN("backend", "GPU workspace kept until the process exits: ", e.what());
    }
  } else {
    XCCL_WARN("backend", "GPU kernels still running at shutdown: the workspace and error word "
                         "are kept until the process exits");
    // A kernel still writes the error word: never free it under the kernel.
    (void)new std::shared_ptr<ErrorWord>(error_);
  }
  if (everyoneDone) {
    workspace_.reset();
  } else {
    (void)workspace_.release();  // a peer may still map it: never free under it
  }
}

void GpuPath::abort() {
  // Kernels spinning on flags return at their next poll; every later call and wait raises.
  error_->abort();
  std::lock_guard<std::mutex> guard(mutex_);
  if (vendor_) vendor_->abort();
}

}  // namespace xccl::backend
