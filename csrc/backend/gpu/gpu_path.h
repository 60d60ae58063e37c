// The GPU side for CUDA builds (core/gpu_side.h): routes each call on CUDA tensors and runs the
// kernel route. Internal to csrc/backend; its members are defined by concern:
//  - gpu_path.cc:                the five collectives with a kernel, and creation;
//  - gpu_path_without_kernel.cc: the other operations of Side (vendor or host route);
//  - gpu_path_request.cc:        the request to algo::planGpu (which route a call takes);
//  - gpu_path_routes.cc:         the vendor and host routes, and world size 1;
//  - gpu_path_batch.cc:          coalesced batches;
//  - gpu_verify.cc:              whether the group may use the kernels (verified on this machine,
//                                time-sliced shared GPU, MIG), agreed at creation; XCCL_GPU_VERIFY;
//  - gpu_path_kernel.cc:         the workspace session (creation, device handle, one kernel-route
//                                call, shutdown and abort);
// and by the helpers core/tensor_args (argument checks, shared with the CPU side), gpu_placement
// (who is where), gpu_order (issue order across routes and graph replays), gpu_events (event pool,
// in-flight tensors), gpu_error (the mapped error word), gpu_watchdog (settles kernel-route
// Works), gpu_rules (the decisions that need neither CUDA nor torch).
//
// Kernel route, per call: the comm stream waits on the caller's current stream (and on earlier
// calls of other routes, gpu_order.h); on the comm stream the input is copied into this rank's
// workspace buffer (the memory peers read through CUDA IPC), the kernel runs and writes the
// caller's output; an event recorded after it completes the GpuWork. Messages larger than the
// workspace run in chunks where the collective is elementwise (all_reduce, broadcast); the others
// go to the vendor library (or host memory when ranks share a GPU) above the workspace size
// (planGpu's rule).
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include "algo/gpu_plan.h"
#include "backend/core/gpu_side.h"
#include "backend/core/tensor_args.h"
#include "backend/gpu/gpu_error.h"
#include "backend/gpu/gpu_events.h"
#include "backend/gpu/gpu_order.h"
#include "backend/gpu/gpu_placement.h"
#include "backend/gpu/gpu_stream.h"
#include "backend/gpu/gpu_watchdog.h"
#include "kernels/launch.h"
#include "net/regions/cuda_ipc/workspace.h"
#include "net/rendezvous/store.h"

namespace xccl::backend {

class GroupCore;

bool capturing(int device);

class GpuPath final : public GpuSide {
 public:
  GpuPath(GroupCore& group, Side& cpu, int device);
  ~GpuPath() override;

  // Side's operations (side.h). gpu_path.cc defines the five with a kernel (kernel, vendor or
  // host route): broadcast, allreduce, allgather_into_tensor_coalesced (the kernel for one pair;
  // the coalesced form takes the vendor or host route), reduce_scatter_tensor_coalesced (likewise)
  // and alltoall_base; gpu_path_without_kernel.cc the others (vendor or host route).
  XCCL_SIDE_OPERATIONS(XCCL_SIDE_OVERRIDE)

  // ---- gpu_path_batch.cc ----
  void startCoalescing(const char* op) override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  bool coalescing() const override { return coalescing_; }
  // ---- gpu_path_kernel.cc ----
  void shutdown(std::chrono::milliseconds timeout) override;
  void abort() override;
  // ---- gpu_path_routes.cc ----
  GpuRouteCounts routeCounts() const override;

 private:
  using Workspace = net::cuda_ipc::Workspace;

  // One call as both the vendor group (a c10d::Backend) and the CPU side spell it: Side mirrors
  // c10d::Backend's names and signatures, so one generic lambda, [&](auto& b) { return
  // b.allreduce(tensors, opts); }, serves the vendor route and the host route alike.
  struct Call {
    template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, Call>>>
    Call(const F& f) : onVendor(f), onHost(f) {}  // NOLINT(google-explicit-constructor)
    std::function<WorkPtr(c10d::Backend&)> onVendor;
    std::function<WorkPtr(Side&)> onHost;
  };

  // The GPU side's device, where every tensor of its calls must be (tensor_args.h).
  c10::Device home() const {
    return c10::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_));
  }
  // gpu_path.cc: the kernel collectives on one pair of tensors.
  WorkPtr allgatherBase(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts);
  WorkPtr reduceScatterBase(at::Tensor& output, at::Tensor& input,
                            const c10d::ReduceScatterOptions& opts);
  // gpu_path_without_kernel.cc: a call with no kernel. `call` runs on the vendor group when it
  // can serve this group and `vendorCan` (false for what NCCL lacks, e.g. bitwise reductions);
  // otherwise on the CPU side with every tensor in `args` (all the call reads or writes) replaced
  // by a host copy while it runs, and `outputs` (a subset of args) copied back.
  WorkPtr withoutKernel(const char* op, const Call& call, const std::vector<at::Tensor*>& args,
                        const std::vector<at::Tensor*>& outputs, bool vendorCan = true);

  // ---- gpu_path_request.cc ----
  // The plan of one call (algo::planGpu decides; bytes in nccl-tests' convention, gpu_plan.h).
  // Creates what the plan needs first (the workspace, the vendor group) and plans again, the
  // same way on every rank, when that showed it cannot exist.
  algo::GpuPlan planFor(algo::GpuCollective collective, size_t bytes, DataType dtype, ReduceOp op,
                        bool evenSplits = true, bool vendorReduces = true);
  kernels::LaunchShape launchShape() const { return kernels::LaunchShape{maxBlocks_}; }

  // ---- gpu_path_routes.cc ----
  // One call ran on `route` (GpuRouteCounts): this group's count and the process's.
  void countRoute(algo::GpuRoute route);
  // The vendor or host route.
  WorkPtr other(const char* op, algo::GpuRoute route, const char* reason, const Call& call,
                const std::vector<at::Tensor*>& args, const std::vector<at::Tensor*>& outputs);
  c10d::Backend* vendorGroup(const char* op);
  // Refuses a vendor call during capture before the vendor group ran one eagerly.
  void checkVendorCapturable(const char* op, bool captured) const;
  c10::intrusive_ptr<c10d::Work> viaVendor(const char* op, c10d::Backend& vendor, const Call& call);
  c10::intrusive_ptr<c10d::Work> viaHost(const char* op, const Call& call,
                                         const std::vector<at::Tensor*>& args,
                                         const std::vector<at::Tensor*>& outputs);
  // World size 1 (the plan's kLocal route): `body` runs on the caller's stream (nothing, or one
  // copy / scaling), after every earlier call of the group; the Work completes with it.
  c10::intrusive_ptr<c10d::Work> solo(c10d::OpType type, const char* op, at::Tensor output,
                                      const std::function<void()>& body);

  // ---- gpu_verify.cc ----
  // At creation, after the placement exchange: fills in groupRequest_'s kernelsVerified (rank
  // 0's answer) and timeSliced, and refuses CUDA IPC for a MIG instance; warns once. Collective.
  void agreeOnKernels(net::Store& store);
  // What XCCL_GPU_VERIFY compares: the call's element type, reduction, size.
  struct VerifyCase {
    DataType dtype = DataType::kUInt8;
    ReduceOp op = ReduceOp::kSum;
    bool reduces = false;
    size_t bytes = 0;
  };
  // With XCCL_GPU_VERIFY=1 outside graph capture: copies of `args` taken before the kernel
  // writes them (on the caller's stream); otherwise nothing.
  std::optional<std::vector<at::Tensor>> snapshotForVerify(const std::vector<at::Tensor*>& args);
  // `work` (the kernel route's) when `before` is empty; otherwise waits for it, runs the same call
  // on `before` through the vendor (host memory where ranks share a GPU) and raises a
  // DistBackendError naming op, dtype, size and rank when an output differs.
  WorkPtr verifiedKernel(const char* op, const VerifyCase& what, const Call& call,
                         std::optional<std::vector<at::Tensor>> before,
                         const std::vector<at::Tensor*>& args,
                         const std::vector<at::Tensor*>& outputs, WorkPtr work);
  static bool verifyFromEnvironment();

  // ---- gpu_path_kernel.cc ----
  // Raises DistBackendError once the error word is set (every call, every route).
  void checkHealthy(const char* op) const { error_->throwIfSet(op); }
  Workspace& workspace(const char* op);
  // The workspace, created on first use; nullptr once the ranks agreed that CUDA IPC cannot work
  // for this group (warned once; planFor then plans without kernels).
  Workspace* workspaceOrNull(const char* op);
  // The one place the workspace is created (a collective step): a call can switch to another
  // creation (e.g. one all ranks agree on) here.
  kernels::DeviceHandle handle(Workspace& ws) const;
  void copyIn(Workspace& ws, const void* src, size_t bytes);
  // One kernel-route call: `body` enqueues copies and launches on the comm stream; `keep`
  // (inputs, outputs, a device factor) stays referenced until the call's event completed.
  c10::intrusive_ptr<c10d::Work> runKernel(c10d::OpType type, const char* op,
                                           std::vector<at::Tensor> keep,
                                           const std::function<void(Workspace&)>& body);
  // Sets the abort bit and waits (bounded) for the comm stream; true when it drained.
  bool drainComm(std::chrono::steady_clock::time_point deadline);

  GroupCore& group_;
  Side& cpu_;  // the group's CPU side: the host route runs calls there
  const int device_;
  GpuStream comm_;
  const algo::Tunables tunables_;  // the group's
  const bool verify_ = verifyFromEnvironment();  // XCCL_GPU_VERIFY
  Placement placement_;
  int maxBlocks_ = 0;  // LaunchShape::maxBlocks; kCannotFit routes around the kernels
  std::shared_ptr<ErrorWord> error_;
  std::shared_ptr<EventPool> events_;
  // One call at a time enqueues (launch order must match across ranks); timed so that shutdown
  // stays bounded while a host-route call holds it.
  std::timed_mutex issueMutex_;
  std::atomic<bool> shutDown_{false};
  // XCCL_GPU_BLOCKING_WAIT: whether a kernel-route Work's wait() waits for its call's outcome.
  const bool blockingWait_;
  std::unique_ptr<StreamOrder> order_;  // under issueMutex_
  uint64_t kernelCalls_ = 0;  // kernel-route calls issued, under issueMutex_ (names them in errors)
  std::array<std::atomic<uint64_t>, GpuRouteCounts::kRoutes> routeCalls_{};  // countRoute
  std::unique_ptr<Watchdog> watchdog_;  // settles kernel-route Works (gpu_watchdog.h)
  std::mutex mutex_;  // guards the lazily created members below
  std::unique_ptr<Workspace> workspace_;
  int workspaceAttempt_ = 0;  // createAgreed attempts so far, alike on every rank
  std::string ipcRefused_;  // why the ranks refused CUDA IPC; "" while not refused
  c10::intrusive_ptr<c10d::Backend> vendor_;
  bool vendorTried_ = false;
  std::atomic<bool> vendorUsedEagerly_{false};  // its communicator exists: capture may use it
  std::atomic<bool> coalescing_{false};  // between startCoalescing and endCoalescing
  std::unique_ptr<InFlight> inFlight_ = std::make_unique<InFlight>();  // leaked if undrained
  // The group's part of every plan request (world, hosts, GPUs, whether kernels fit), fixed once
  // the constructor placed the ranks: a call fills in only its own part, and only on a cache miss.
  algo::GpuRequest groupRequest_;
  // Plans by call shape (cachedPlan in gpu_path_request.cc).
  // The call's part of a request and what the group found out so far (the rest is fixed).
  struct PlanKey {
    size_t bytes;
    uint8_t collective, dtype, op;
    uint8_t flags;  // algo::gpuCallFlags
    bool operator==(const PlanKey& o) const {
      return bytes == o.bytes && collective == o.collective && dtype == o.dtype && op == o.op &&
             flags == o.flags;
    }
  };
  struct PlanKeyHash {
    size_t operator()(const PlanKey& k) const {
      return std::hash<size_t>()(k.bytes) ^ (size_t{k.collective} << 1 | size_t{k.dtype} << 9 |
                                             size_t{k.op} << 17 | size_t{k.flags} << 25);
    }
  };
  // The plan for `key`: a hash lookup, or algo::planGpu on groupRequest_ plus the key's part.
  algo::GpuPlan cachedPlan(const PlanKey& key);
  static constexpr size_t kMaxCachedPlans = 4096;
  std::mutex planMutex_;
  std::unordered_map<PlanKey, algo::GpuPlan, PlanKeyHash> plans_;
};

}  // namespace xccl::backend
