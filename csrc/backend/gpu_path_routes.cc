// GpuPath: argument checks, planning, the vendor and host routes, world size 1 and coalesced
// batches (gpu_path.h says which file holds what).
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "backend/compat.h"
#include "backend/gpu_path.h"
#include "backend/gpu_rules.h"
#include "backend/gpu_stream.h"
#include "backend/machine.h"
#include "backend/process_group.h"
#include "common/logging.h"

namespace xccl::backend {

at::Tensor GpuPath::singleOnDevice(const std::vector<at::Tensor>& tensors, const char* op) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "xccl ", op,
                    " takes exactly one tensor per process, got ", tensors.size());
  checkOnDevice(tensors[0], op, "tensor");
  return tensors[0];
}

// One device per group, like NCCL's: the workspace and the comm stream live there.
void GpuPath::checkOnDevice(const at::Tensor& t, const char* op, const char* what) {
  TORCH_CHECK_VALUE(t.defined(), "xccl ", op, ": ", what, " is undefined");
  TORCH_CHECK_VALUE(t.is_cuda() && t.device().index() == device_, "xccl ", op, ": ", what,
                    " is on ", t.device(), " but this group's GPU collectives run on cuda:",
                    device_, " (one device per process group)");
  TORCH_CHECK_VALUE(t.layout() == at::kStrided && t.is_contiguous(), "xccl ", op, ": ", what,
                    " must be a dense contiguous tensor");
}

GpuReduce GpuPath::reduceOnGpu(const c10d::ReduceOp& op, const char* name) {
  if (op.op_ == c10d::ReduceOp::PREMUL_SUM) {
    auto* supplement = dynamic_cast<compat::PreMulSumSupplement*>(op.supplement_.get());
    if (supplement != nullptr && supplement->tensor_factor.defined() &&
        supplement->tensor_factor.is_cuda()) {
      const at::Tensor& factor = supplement->tensor_factor;
      TORCH_CHECK_VALUE(factor.numel() == 1, "xccl ", name, ": PREMUL_SUM's factor must hold "
                        "one element, got ", factor.numel());
      GpuReduce reduce{{ReduceOp::kPreMulSum, std::nullopt}, {}};
      // On the caller's stream, which the comm stream waits on: capturable, no host sync.
      reduce.deviceFactor =
          factor.to(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device_)), at::kFloat)
              .reshape({});
      return reduce;
    }
  }
  // A factor that is a number or a CPU tensor: read on the host (no device sync).
  return GpuReduce{toReduceSpec(op, name), {}};
}

algo::GpuPlan GpuPath::planFor(algo::GpuCollective collective, size_t bytes, DataType dtype,
                               ReduceOp op, bool evenSplits, bool vendorReduces) {
  algo::GpuRequest request;
  request.collective = collective;
  request.bytes = bytes;
  request.dtype = dtype;
  request.op = op;
  request.evenSplits = evenSplits;
  request.vendorReduces = vendorReduces;
  request.coalescing = coalescing_;
  request.worldSize = group_.getSize();
  request.hosts = placement_.hosts;
  request.ranksPerGpu = placement_.ranksPerGpu;
  request.gpus = placement_.gpus;
  request.kernelsFit = maxBlocks_ != rules::kCannotFit;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    request.ipcRefused = !ipcRefused_.empty();
    request.vendorAvailable = !vendorTried_ || vendor_;
  }
  algo::GpuPlan plan = cachedPlan(request);
  const char* name = algo::gpuCollectiveName(collective);
  // The first kernel-route call creates the workspace (a step every rank takes alike, as every
  // rank planned alike); the first vendor-route call of a group whose ranks share a GPU creates
  // the vendor group. Where that failed, the group knows more and plans again.
  if (plan.route == algo::GpuRoute::kKernel && workspaceOrNull(name) == nullptr) {
    request.ipcRefused = true;
    plan = cachedPlan(request);
  }
  if (plan.route == algo::GpuRoute::kVendor && vendorGroup(name) == nullptr) {
    request.vendorAvailable = false;
    plan = cachedPlan(request);
  }
  XCCL_DEBUG("backend", name, " ", bytes, " B: ", algo::gpuRouteName(plan.route), " ", plan.name,
             " (", plan.reason, ")");
  return plan;
}

// algo::planGpu is pure in (request, topology, tunables) and only the call's part of the request
// and what the group found out vary within a group, so its plans (with their reason text) are
// computed once per distinct key: training repeats the same few sizes, and a hit costs one hash
// lookup instead of the planner's string building (issue order is kept: callers hold no lock
// across planning).
algo::GpuPlan GpuPath::cachedPlan(const algo::GpuRequest& request) {
  const uint8_t flags = static_cast<uint8_t>(request.evenSplits | request.vendorReduces << 1 |
                                             request.coalescing << 2 | request.ipcRefused << 3 |
                                             request.vendorAvailable << 4);
  const PlanKey key{request.bytes, static_cast<uint8_t>(request.collective),
                    static_cast<uint8_t>(request.dtype), static_cast<uint8_t>(request.op), flags};
  std::lock_guard<std::mutex> guard(planMutex_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  algo::GpuPlan plan = algo::planGpu(request, thisMachine(), tunables_);
  if (plans_.size() >= kMaxCachedPlans) plans_.clear();  // bounded: a sweep over many sizes
  plans_.emplace(key, plan);
  return plan;
}

c10::intrusive_ptr<c10d::Work> GpuPath::withoutKernel(const char* op, const Call& call,
                                                      const std::vector<at::Tensor*>& args,
                                                      const std::vector<at::Tensor*>& outputs,
                                                      bool vendorCan) {
  for (at::Tensor* t : args) checkOnDevice(*t, op, "tensor");
  checkHealthy(op);
  const algo::GpuPlan plan =
      planFor(algo::GpuCollective::kOther, 0, DataType::kUInt8, ReduceOp::kSum, true, vendorCan);
  return other(op, plan.route, plan.reason.c_str(), call, args, outputs);
}

c10::intrusive_ptr<c10d::Work> GpuPath::other(const char* op, algo::GpuRoute route,
                                              const char* reason, const Call& call,
                                              const std::vector<at::Tensor*>& args,
                                              const std::vector<at::Tensor*>& outputs) {
  if (coalescing_ && route != algo::GpuRoute::kVendor) {
    (void)endCoalescing();  // what the batch held so far still runs
    TORCH_CHECK_VALUE(false, "xccl ", op, " cannot be part of a coalesced batch with CUDA "
                      "tensors (", reason, "); the batch was closed");
  }
  if (route == algo::GpuRoute::kVendor) {
    c10d::Backend* vendor = vendorGroup(op);
    TORCH_INTERNAL_ASSERT(vendor != nullptr, "planned the vendor route without a vendor group");
    return viaVendor(op, *vendor, call);
  }
  return viaHost(op, call, args, outputs);
}

// Created when the GPU side is (GpuPath's constructor) where a vendor route is possible, so that
// no graph capture ever constructs it.
c10d::Backend* GpuPath::vendorGroup(const char* op) {
  (void)op;
  std::lock_guard<std::mutex> guard(mutex_);
  if (!vendor_ && !vendorTried_) {
    vendorTried_ = true;
    if (VendorFactory factory = vendorFactory()) {
      auto store = c10::make_intrusive<c10d::PrefixStore>("xccl/vendor/", group_.store());
      vendor_ = factory(store, group_.getRank(), group_.getSize(), group_.timeout(),
                        group_.groupName());
    }
    if (!vendor_) {
      XCCL_WARN("backend", "no vendor library (NCCL/RCCL) in this torch: GPU collectives "
                           "without a kernel go through host memory");
    }
  }
  return vendor_.get();
}

void GpuPath::checkVendorCapturable(const char* op, bool captured) const {
  // NCCL sets up its communicator (device memory, a store exchange) at the group's first
  // collective, which a capture cannot hold: refuse rather than break the capture.
  TORCH_CHECK(!captured || vendorUsedEagerly_, "xccl ", op, ": this call takes the vendor route "
              "(NCCL/RCCL), whose first collective sets up its communicator and cannot run "
              "during CUDA graph capture; run the same collectives once before capturing (a "
              "warm-up iteration), as torch.cuda.graph's documentation recommends");
}

c10::intrusive_ptr<c10d::Work> GpuPath::viaVendor(const char* op, c10d::Backend& vendor,
                                                  const Call& call) {
  const bool captured = capturing(device_);
  checkVendorCapturable(op, captured);
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  std::lock_guard<std::timed_mutex> issue(issueMutex_);
  order_->beforeVendor(currentGpuStream(device_).stream(), captured);
  c10::intrusive_ptr<c10d::Work> work = call(vendor);
  if (!captured) vendorUsedEagerly_ = true;
  // Inside a batch NCCL runs nothing before endCoalescing, whose Work counts instead.
  if (!coalescing_) order_->afterVendor(work, captured);
  return work;
}

c10::intrusive_ptr<c10d::Work> GpuPath::viaHost(const char* op, const Call& call,
                                                const std::vector<at::Tensor*>& args,
                                                const std::vector<at::Tensor*>& outputs) {
  TORCH_CHECK(!capturing(device_), "xccl ", op, ": this call would go through host memory, which "
                            "cannot be captured in a CUDA graph");
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  std::lock_guard<std::timed_mutex> issue(issueMutex_);
  GpuStream current = currentGpuStream(device_);
  // The copies below synchronise the caller's stream: make it follow the other routes first.
  order_->beforeCurrentStream(current.stream(), false);
  std::vector<at::Tensor> originals;
  for (at::Tensor* t : args) {
    originals.push_back(*t);
    *t = t->to(at::kCPU);  // waits for the caller's stream
  }
  auto restore = [&] {
    for (size_t i = 0; i < args.size(); ++i) *args[i] = originals[i];
  };
  std::vector<at::Tensor> hostOutputs;
  c10d::OpType type = c10d::OpType::UNKNOWN;
  int source = -1;
  try {
    c10::intrusive_ptr<c10d::Work> hostWork = call(group_);
    hostWork->wait();
    type = hostWork->retrieveOpType();
    if (type == c10d::OpType::RECVANYSOURCE) source = hostWork->sourceRank();
    for (at::Tensor* t : outputs) hostOutputs.push_back(*t);
  } catch (...) {
    restore();
    throw;
  }
  restore();
  std::vector<at::Tensor> results;
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i]->copy_(hostOutputs[i]);  // on the caller's stream, like any later work
    results.push_back(*outputs[i]);
  }
  std::shared_ptr<CudaEvent> done = events_->take();
  checkCuda(XCCL_RT(EventRecord)(done->get(), current.stream()), "cudaEventRecord");
  auto work = c10::make_intrusive<GpuWork>(group_.getRank(), type, op, current.unwrap(), done,
                                           false, results, error_);
  work->setSourceRank(source);
  return work;
}

c10::intrusive_ptr<c10d::Work> GpuPath::solo(c10d::OpType type, const char* op,
                                             at::Tensor output,
                                             const std::function<void()>& body) {
  const bool captured = capturing(device_);
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  std::lock_guard<std::timed_mutex> issue(issueMutex_);
  GpuStream current = currentGpuStream(device_);
  order_->beforeCurrentStream(current.stream(), captured);
  body();  // nothing, one copy or one scaling, on the caller's stream; never the workspace
  std::shared_ptr<CudaEvent> done = events_->take();
  checkCuda(XCCL_RT(EventRecord)(done->get(), current.stream()), "cudaEventRecord");
  return c10::make_intrusive<GpuWork>(group_.getRank(), type, op, current.unwrap(), done,
                                      captured, std::vector<at::Tensor>{output}, error_);
}

void GpuPath::startCoalescing(const char* op) {
  TORCH_CHECK_VALUE(placement_.ranksPerGpu == 1, "xccl ", op, ": batch_isend_irecv / "
                    "coalescing with CUDA tensors runs on NCCL/RCCL, which refuse ranks that "
                    "share a GPU; issue the operations one by one");
  c10d::Backend* vendor = vendorGroup(op);
  TORCH_CHECK_VALUE(vendor != nullptr, "xccl ", op, ": batch_isend_irecv / coalescing with "
                    "CUDA tensors runs on NCCL/RCCL, which this torch lacks; issue the "
                    "operations one by one");
  checkHealthy(op);
  const bool captured = capturing(device_);
  checkVendorCapturable(op, captured);
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  std::lock_guard<std::timed_mutex> issue(issueMutex_);
  order_->beforeVendor(currentGpuStream(device_).stream(), captured);
  vendor->startCoalescing();
  coalescing_ = true;
}

c10::intrusive_ptr<c10d::Work> GpuPath::endCoalescing() {
  coalescing_ = false;
  const bool captured = capturing(device_);
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  std::lock_guard<std::timed_mutex> issue(issueMutex_);
  order_->beforeVendor(currentGpuStream(device_).stream(), captured);
  c10::intrusive_ptr<c10d::Work> work = vendorGroup("endCoalescing")->endCoalescing();
  if (!captured) vendorUsedEagerly_ = true;
  order_->afterVendor(work, captured);
  return work;
}

}  // namespace xccl::backend
