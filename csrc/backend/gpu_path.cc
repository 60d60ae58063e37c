// GpuOps for CUDA builds: routes each CUDA collective (gpu_ops.h) and runs the kernel route.
//
// Kernel route, per call: the internal comm stream waits on an event recorded on the caller's
// current stream; on the comm stream the input is copied into this rank's workspace buffer (the
// memory peers read through CUDA IPC), the kernel runs and writes the caller's output; an event
// recorded after it completes the GpuWork. Messages larger than the workspace run in chunks
// where the collective is elementwise (all_reduce, broadcast); the others go to the vendor
// library (or host memory when ranks share a GPU) above the workspace size.
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "algo/gpu_plan.h"
#include "backend/gpu_ops.h"
#include "backend/gpu_work.h"
#include "backend/machine.h"
#include "backend/process_group.h"
#include "backend/store_adapter.h"
#include "backend/tensor_args.h"
#include "common/env.h"
#include "common/logging.h"
#include "kernels/launch.h"
#include "kernels/plan.h"
#include "net/cuda_ipc/workspace.h"
#include "net/shm/segment.h"

namespace xccl::backend {
namespace {

// "0000:18:00.0", lower case, as topology files write it.
std::string busIdOf(int device) {
  char id[32] = {};
  checkCuda(cudaDeviceGetPCIBusId(id, sizeof(id), device), "cudaDeviceGetPCIBusId");
  std::string text(id);
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool capturing() {
  return c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
}

// Where the group's ranks and GPUs are: exchanged once, the same on every rank.
struct Placement {
  int hosts = 1;
  int ranksPerGpu = 1;
  std::vector<int> gpus;  // topology indices of this host's ranks' GPUs (empty: not listed)
  bool sameHost = true;   // every rank on this host
};

Placement exchangePlacement(net::Store& store, int rank, int size, int device,
                            std::chrono::milliseconds timeout) {
  std::string host = net::shm::Options::fromEnvironment().hostIdentity;
  if (host.empty()) host = net::shm::hostIdentity();
  const std::string bus = busIdOf(device);
  auto all = net::allGatherThroughStore(store, "gpu_place", rank, size,
                                        net::toBytes(host + "\n" + bus), timeout);
  Placement placement;
  std::set<std::string> hosts;
  std::map<std::string, int> perGpu;
  std::set<std::string> localBuses;
  for (const auto& bytes : all) {
    const std::string text = net::toString(bytes);
    const auto cut = text.find('\n');
    const std::string peerHost = text.substr(0, cut), peerBus = text.substr(cut + 1);
    hosts.insert(peerHost);
    placement.ranksPerGpu = std::max(placement.ranksPerGpu, ++perGpu[peerHost + "/" + peerBus]);
    if (peerHost == host) localBuses.insert(peerBus);
  }
  placement.hosts = static_cast<int>(hosts.size());
  placement.sameHost = placement.hosts == 1;
  const topo::Topology& topology = thisMachine();
  for (const std::string& bus : localBuses) {
    auto it = std::find_if(topology.gpus.begin(), topology.gpus.end(),
                           [&](const topo::Gpu& gpu) { return gpu.pciBusId == bus; });
    if (it == topology.gpus.end()) {
      placement.gpus.clear();  // the topology does not list them all: let the plan decide
      break;
    }
    placement.gpus.push_back(it->index);
  }
  return placement;
}

// Tensors (inputs and outputs) of kernel-route collectives whose completion event has not been
// seen yet: they stay referenced here whatever the caller does with the Work, so the caching
// allocator cannot hand their memory to other work while the comm stream still uses it.
class InFlight {
 public:
  void add(std::shared_ptr<CudaEvent> done, std::vector<at::Tensor> tensors) {
    std::lock_guard<std::mutex> guard(mutex_);
    entries_.push_back({std::move(done), std::move(tensors)});
  }
  void prune() {
    std::lock_guard<std::mutex> guard(mutex_);
    while (!entries_.empty() && entries_.front().done->query()) entries_.pop_front();
  }

 private:
  struct Entry {
    std::shared_ptr<CudaEvent> done;
    std::vector<at::Tensor> tensors;
  };
  std::mutex mutex_;
  std::deque<Entry> entries_;  // in stream order: the first not done blocks the rest
};

class GpuPath final : public GpuOps {
 public:
  GpuPath(ProcessGroupXccl& group, int device)
      : group_(group),
        device_(device),
        comm_(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device)),
        tunables_(algo::GpuTunables::fromEnvironment()) {
    StoreAdapter store(group_.store(), "xccl/");
    placement_ = exchangePlacement(store, group_.getRank(), group_.getSize(), device,
                                   group_.timeout());
  }

  ~GpuPath() override {
    shutdown(std::chrono::seconds(10));
    if (errorCopy_ != nullptr) cudaFreeHost(errorCopy_);
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    at::Tensor tensor = singleOnDevice(tensors, "allreduce");
    const ReduceSpec spec = toReduceSpec(opts.reduceOp, "allreduce");
    const ElementView view = reduceView(tensor, spec, "allreduce");
    const algo::GpuPlan plan = vendorOrHost(
        planFor(algo::GpuCollective::kAllReduce, byteSize(tensor), view.type, spec.op, true),
        vendorReduces(spec.op));
    auto viaLibrary = [&](c10d::Backend& b) { return b.allreduce(tensors, opts); };
    if (plan.route != algo::GpuRoute::kKernel) {
      return other("allreduce", plan, viaLibrary, {&tensors[0]}, {&tensors[0]});
    }
    kernels::AllReduceArgs args;
    args.dtype = view.type;
    args.op = spec.op;
    args.preMulFactor = static_cast<float>(spec.factor.value_or(1.0));
    args.algorithm = algo::allReduceAlgorithm(plan.kernel);
    const size_t elem = elementSize(view.type);
    return runKernel(c10d::OpType::ALLREDUCE, "allreduce", {tensor}, [&](Workspace& ws) {
      const size_t perChunk = ws.layout().dataBytes / elem;
      auto* data = static_cast<char*>(tensor.data_ptr());
      for (size_t base = 0; base < view.count; base += perChunk) {
        const size_t count = std::min(perChunk, view.count - base);
        copyIn(ws, data + base * elem, count * elem);
        args.handle = handle(ws);
        args.output = data + base * elem;
        args.count = count;
        kernels::launchAllReduce(args, comm_.stream());
      }
    });
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    at::Tensor tensor = singleOnDevice(tensors, "broadcast");
    checkRoot(opts.rootRank, group_.getSize(), "broadcast");
    const size_t bytes = byteSize(tensor);
    const algo::GpuPlan plan =
        planFor(algo::GpuCollective::kBroadcast, bytes, DataType::kUInt8, ReduceOp::kSum, true);
    auto viaLibrary = [&](c10d::Backend& b) { return b.broadcast(tensors, opts); };
    if (plan.route != algo::GpuRoute::kKernel) {
      return other("broadcast", plan, viaLibrary, {&tensors[0]}, {&tensors[0]});
    }
    const int root = static_cast<int>(opts.rootRank);
    return runKernel(c10d::OpType::BROADCAST, "broadcast", {tensor}, [&](Workspace& ws) {
      const size_t perChunk = ws.layout().dataBytes;
      auto* data = static_cast<char*>(tensor.data_ptr());
      for (size_t base = 0; base < bytes; base += perChunk) {
        const size_t count = std::min(perChunk, bytes - base);
        if (group_.getRank() == root) copyIn(ws, data + base, count);
        kernels::BroadcastArgs args;
        args.handle = handle(ws);
        args.output = data + base;
        args.count = count;
        args.dtype = DataType::kUInt8;
        args.root = root;
        kernels::launchBroadcast(args, comm_.stream());
      }
    });
  }

  c10::intrusive_ptr<c10d::Work> allgatherBase(at::Tensor& output, at::Tensor& input,
                                               const c10d::AllgatherOptions& opts) override {
    const char* name = "allgather_into_tensor";
    checkOnDevice(input, name, "input");
    checkOnDevice(output, name, "output");
    checkFlatPair(output, "output", input, "input", group_.getSize(), name);
    const size_t bytes = byteSize(input);
    const algo::GpuPlan plan = fitWorkspace(
        planFor(algo::GpuCollective::kAllGather, byteSize(output), DataType::kUInt8,
                ReduceOp::kSum, true),
        bytes);
    std::vector<at::Tensor> outputs{output}, inputs{input};
    auto viaLibrary = [&](c10d::Backend& b) {
      return b.allgather_into_tensor_coalesced(outputs, inputs, opts);
    };
    if (plan.route != algo::GpuRoute::kKernel) {
      return other(name, plan, viaLibrary, {&inputs[0], &outputs[0]}, {&outputs[0]});
    }
    return runKernel(c10d::OpType::_ALLGATHER_BASE, name, {output, input}, [&](Workspace& ws) {
      copyIn(ws, input.data_ptr(), bytes);
      kernels::AllGatherArgs args;
      args.handle = handle(ws);
      args.output = output.data_ptr();
      args.count = bytes;
      args.dtype = DataType::kUInt8;
      kernels::launchAllGather(args, comm_.stream());
    });
  }

  c10::intrusive_ptr<c10d::Work> reduceScatterBase(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    const char* name = "reduce_scatter_tensor";
    checkOnDevice(input, name, "input");
    checkOnDevice(output, name, "output");
    checkFlatPair(input, "input", output, "output", group_.getSize(), name);
    const ReduceSpec spec = toReduceSpec(opts.reduceOp, name);
    const ElementView view = reduceView(output, spec, name);
    const size_t bytes = byteSize(input);
    const algo::GpuPlan plan = vendorOrHost(
        fitWorkspace(planFor(algo::GpuCollective::kReduceScatter, bytes, view.type, spec.op, true),
                     bytes),
        vendorReduces(spec.op));
    std::vector<at::Tensor> outputs{output}, inputs{input};
    auto viaLibrary = [&](c10d::Backend& b) {
      return b.reduce_scatter_tensor_coalesced(outputs, inputs, opts);
    };
    if (plan.route != algo::GpuRoute::kKernel) {
      return other(name, plan, viaLibrary, {&inputs[0], &outputs[0]}, {&outputs[0]});
    }
    return runKernel(c10d::OpType::_REDUCE_SCATTER_BASE, name, {output, input},
                     [&](Workspace& ws) {
                       copyIn(ws, input.data_ptr(), bytes);
                       kernels::ReduceScatterArgs args;
                       args.handle = handle(ws);
                       args.output = output.data_ptr();
                       args.count = view.count;
                       args.dtype = view.type;
                       args.op = spec.op;
                       args.preMulFactor = static_cast<float>(spec.factor.value_or(1.0));
                       kernels::launchReduceScatter(args, comm_.stream());
                     });
  }

  c10::intrusive_ptr<c10d::Work> alltoallBase(at::Tensor& output, at::Tensor& input,
                                              std::vector<int64_t>& outputSplits,
                                              std::vector<int64_t>& inputSplits,
                                              const c10d::AllToAllOptions& opts) override {
    const char* name = "alltoall_base";
    checkOnDevice(input, name, "input");
    checkOnDevice(output, name, "output");
    const int size = group_.getSize();
    const bool even = outputSplits.empty() && inputSplits.empty() &&
                      input.numel() == output.numel() && input.numel() % size == 0;
    const size_t bytes = byteSize(input);
    const algo::GpuPlan plan = fitWorkspace(
        planFor(algo::GpuCollective::kAllToAll, bytes, DataType::kUInt8, ReduceOp::kSum, even),
        bytes);
    std::vector<at::Tensor*> args{&input, &output};
    auto viaLibrary = [&](c10d::Backend& b) {
      return b.alltoall_base(output, input, outputSplits, inputSplits, opts);
    };
    if (plan.route != algo::GpuRoute::kKernel || !even) {
      return other(name, plan, viaLibrary, args, {&output});
    }
    TORCH_CHECK_VALUE(input.scalar_type() == output.scalar_type(), "xccl ", name,
                      ": input and output dtypes differ");
    return runKernel(c10d::OpType::ALLTOALL_BASE, name, {output, input}, [&](Workspace& ws) {
      copyIn(ws, input.data_ptr(), bytes);
      kernels::AllToAllArgs a;
      a.handle = handle(ws);
      a.output = output.data_ptr();
      a.count = bytes / size;
      a.dtype = DataType::kUInt8;
      kernels::launchAllToAll(a, comm_.stream());
    });
  }

  c10::intrusive_ptr<c10d::Work> withoutKernel(const char* op, const Call& call,
                                               const std::vector<at::Tensor*>& args,
                                               const std::vector<at::Tensor*>& outputs,
                                               bool vendorCan) override {
    for (at::Tensor* t : args) checkOnDevice(*t, op, "tensor");
    algo::GpuPlan plan;
    plan.route = placement_.ranksPerGpu > 1 || !vendorCan ? algo::GpuRoute::kHost
                                                          : algo::GpuRoute::kVendor;
    plan.reason = vendorCan ? "no kernel for this operation"
                            : "no kernel, and NCCL/RCCL have no such reduction";
    return other(op, plan, call, args, outputs);
  }

  void startCoalescing(const char* op) override {
    TORCH_CHECK_VALUE(placement_.ranksPerGpu == 1, "xccl ", op, ": batch_isend_irecv / "
                      "coalescing with CUDA tensors runs on NCCL/RCCL, which refuse ranks that "
                      "share a GPU; issue the operations one by one");
    c10d::Backend* vendor = vendorGroup(op);
    TORCH_CHECK_VALUE(vendor != nullptr, "xccl ", op, ": batch_isend_irecv / coalescing with "
                      "CUDA tensors runs on NCCL/RCCL, which this torch lacks; issue the "
                      "operations one by one");
    vendor->startCoalescing();
    coalescing_ = true;
  }

  c10::intrusive_ptr<c10d::Work> endCoalescing() override {
    coalescing_ = false;
    return vendorGroup("endCoalescing")->endCoalescing();
  }

  bool coalescing() const override { return coalescing_; }

  void shutdown(std::chrono::milliseconds timeout) override {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!workspace_) return;
    // Peers may still read this rank's buffer until they finished their last kernel: wait for
    // our own kernels, then for every rank to say so, before freeing (net/cuda_ipc/workspace.h).
    bool everyoneDone = false;
    try {
      checkCuda(cudaStreamSynchronize(comm_.stream()), "cudaStreamSynchronize");
      StoreAdapter store(group_.store(), "xccl/");
      net::allGatherThroughStore(store, "gpu_ws_done", group_.getRank(), group_.getSize(),
                                 net::toBytes("1"), timeout);
      everyoneDone = true;
    } catch (const std::exception& e) {
      XCCL_WARN("backend", "GPU workspace kept until the process exits: ", e.what());
    }
    if (everyoneDone) {
      workspace_.reset();
    } else {
      (void)workspace_.release();  // a peer may still map it: never free under it
    }
  }

 private:
  using Workspace = net::cuda_ipc::Workspace;

  at::Tensor singleOnDevice(const std::vector<at::Tensor>& tensors, const char* op) {
    TORCH_CHECK_VALUE(tensors.size() == 1, "xccl ", op,
                      " takes exactly one tensor per process, got ", tensors.size());
    checkOnDevice(tensors[0], op, "tensor");
    return tensors[0];
  }

  // One device per group, like NCCL's: the workspace and the comm stream live there.
  void checkOnDevice(const at::Tensor& t, const char* op, const char* what) {
    TORCH_CHECK_VALUE(t.defined(), "xccl ", op, ": ", what, " is undefined");
    TORCH_CHECK_VALUE(t.is_cuda() && t.device().index() == device_, "xccl ", op, ": ", what,
                      " is on ", t.device(), " but this group's GPU collectives run on cuda:",
                      device_, " (one device per process group)");
    TORCH_CHECK_VALUE(t.layout() == at::kStrided && t.is_contiguous(), "xccl ", op, ": ", what,
                      " must be a dense contiguous tensor");
  }

  algo::GpuPlan planFor(algo::GpuCollective collective, size_t bytes, DataType dtype,
                        ReduceOp op, bool evenSplits) {
    algo::GpuRequest request;
    request.collective = collective;
    request.bytes = bytes;
    request.dtype = dtype;
    request.op = op;
    request.evenSplits = evenSplits;
    request.worldSize = group_.getSize();
    request.hosts = placement_.hosts;
    request.ranksPerGpu = placement_.ranksPerGpu;
    request.gpus = placement_.gpus;
    algo::GpuPlan plan = algo::planGpu(request, thisMachine(), tunables_);
    if (coalescing_) {
      plan.route = algo::GpuRoute::kVendor;
      plan.reason = "inside a coalesced batch, which the vendor library runs";
    }
    XCCL_DEBUG("backend", algo::gpuCollectiveName(collective), " ", bytes, " B: ", plan.name,
               " (", plan.reason, ")");
    return plan;
  }

  // all_gather, reduce_scatter and all_to_all run in one launch: a per-rank input larger than
  // the workspace goes where the plan would send it without a kernel.
  algo::GpuPlan fitWorkspace(algo::GpuPlan plan, size_t inputBytes) const {
    if (plan.route != algo::GpuRoute::kKernel || inputBytes <= workspaceBytes()) return plan;
    plan.route = placement_.ranksPerGpu > 1 ? algo::GpuRoute::kHost : algo::GpuRoute::kVendor;
    plan.reason = std::to_string(inputBytes) + " B input exceeds the GPU workspace (" +
                  std::to_string(workspaceBytes()) + " B, XCCL_GPU_WORKSPACE_BYTES)";
    return plan;
  }

  // A vendor plan for something the vendor library lacks runs through host memory instead.
  static algo::GpuPlan vendorOrHost(algo::GpuPlan plan, bool vendorCan) {
    if (plan.route == algo::GpuRoute::kVendor && !vendorCan) {
      plan.route = algo::GpuRoute::kHost;
      plan.reason += "; NCCL/RCCL have no such reduction";
    }
    return plan;
  }

  static size_t workspaceBytes() {
    static const size_t bytes = static_cast<size_t>(env::getInt("XCCL_GPU_WORKSPACE_BYTES"));
    return bytes;
  }

  // The vendor or host route.
  c10::intrusive_ptr<c10d::Work> other(const char* op, const algo::GpuPlan& plan,
                                       const Call& call, const std::vector<at::Tensor*>& args,
                                       const std::vector<at::Tensor*>& outputs) {
    if (coalescing_ && plan.route != algo::GpuRoute::kVendor) {
      (void)endCoalescing();  // what the batch held so far still runs
      TORCH_CHECK_VALUE(false, "xccl ", op, " cannot be part of a coalesced batch with CUDA "
                        "tensors (", plan.reason, "); the batch was closed");
    }
    if (plan.route == algo::GpuRoute::kVendor) {
      if (c10d::Backend* vendor = vendorGroup(op)) return call(*vendor);
    }
    return viaHost(op, call, args, outputs);
  }

  c10d::Backend* vendorGroup(const char* op) {
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

  c10::intrusive_ptr<c10d::Work> viaHost(const char* op, const Call& call,
                                         const std::vector<at::Tensor*>& args,
                                         const std::vector<at::Tensor*>& outputs) {
    TORCH_CHECK(!capturing(), "xccl ", op, ": this call would go through host memory, which "
                              "cannot be captured in a CUDA graph");
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
    auto done = std::make_shared<CudaEvent>();
    c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_);
    checkCuda(cudaEventRecord(done->get(), current.stream()), "cudaEventRecord");
    auto work = c10::make_intrusive<GpuWork>(group_.getRank(), type, op, current.unwrap(), done,
                                             false, results, nullptr);
    work->setSourceRank(source);
    return work;
  }

  // Creates the workspace on first use: a collective step, reached by every rank at the same
  // call because every rank plans alike.
  Workspace& workspace(const char* op) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!workspace_) {
      TORCH_CHECK(!capturing(), "xccl ", op, ": the first GPU collective of a group sets up "
                                "shared device memory, which cannot happen during CUDA graph "
                                "capture; run the collective once before capturing");
      StoreAdapter store(group_.store(), "xccl/");
      try {
        workspace_ = Workspace::create(store, "gpu_ws", group_.getRank(), group_.getSize(),
                                       device_, workspaceBytes(), group_.timeout());
      } catch (const Error& e) {
        C10_THROW_ERROR(DistBackendError, std::string("xccl ") + op + ": " + e.what());
      }
      mapEveryPeer(store, op);
      checkCuda(cudaHostAlloc(reinterpret_cast<void**>(&errorCopy_), sizeof(uint32_t),
                              cudaHostAllocDefault),
                "cudaHostAlloc");
      *errorCopy_ = 0;
    }
    return *workspace_;
  }

  // Maps every peer's buffer now and agrees on the outcome: a rank that cannot map a peer
  // must not leave the others spinning in their first kernel until the timeout.
  void mapEveryPeer(net::Store& store, const char* op) {
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

  kernels::DeviceHandle handle(Workspace& ws) const {
    kernels::DeviceHandle h{};
    for (int r = 0; r < ws.size(); ++r) {
      h.buffers[r] = ws.data(r);
      h.flags[r] = static_cast<kernels::FlagArea*>(ws.flags(r));
    }
    h.epochs = ws.epochs();
    h.error = ws.error();
    h.timeoutNs = static_cast<uint64_t>(group_.timeout().count()) * 1000000ull;
    h.rank = ws.rank();
    h.worldSize = ws.size();
    return h;
  }

  void copyIn(Workspace& ws, const void* src, size_t bytes) {
    checkCuda(cudaMemcpyAsync(ws.data(ws.rank()), src, bytes, cudaMemcpyDeviceToDevice,
                              comm_.stream()),
              "cudaMemcpyAsync");
  }

  // "" when the kernels recorded no error (as of the last completed collective's copy).
  std::string deviceError() const {
    const uint32_t word = errorCopy_ ? *static_cast<volatile uint32_t*>(errorCopy_) : 0;
    return word == 0 ? "" : kernels::describeDeviceError(word);
  }

  c10::intrusive_ptr<c10d::Work> runKernel(c10d::OpType type, const char* op,
                                           std::vector<at::Tensor> tensors,
                                           const std::function<void(Workspace&)>& body) {
    const std::string earlier = deviceError();
    if (!earlier.empty()) {
      C10_THROW_ERROR(DistBackendError, std::string("xccl ") + op + ": the group is unusable: "
                                            "an earlier GPU collective failed: " + earlier);
    }
    Workspace& ws = workspace(op);
    const bool captured = capturing();
    if (!captured) inFlight_.prune();
    c10::cuda::CUDAGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
    c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_);
    CudaEvent ready;
    checkCuda(cudaEventRecord(ready.get(), current.stream()), "cudaEventRecord");
    checkCuda(cudaStreamWaitEvent(comm_.stream(), ready.get(), 0), "cudaStreamWaitEvent");
    try {
      body(ws);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kInvalidArgument) TORCH_CHECK_VALUE(false, "xccl ", op, ": ", e.what());
      C10_THROW_ERROR(DistBackendError, std::string("xccl ") + op + ": " + e.what());
    }
    if (!captured) {
      // The error word, as of this collective, lands in pinned memory for the next call.
      checkCuda(cudaMemcpyAsync(errorCopy_, ws.error(), sizeof(uint32_t),
                                cudaMemcpyDeviceToHost, comm_.stream()),
                "cudaMemcpyAsync");
    }
    auto done = std::make_shared<CudaEvent>();
    checkCuda(cudaEventRecord(done->get(), comm_.stream()), "cudaEventRecord");
    if (captured) {
      // The capture must rejoin the caller's stream before it ends.
      checkCuda(cudaStreamWaitEvent(current.stream(), done->get(), 0), "cudaStreamWaitEvent");
    } else {
      inFlight_.add(done, tensors);
    }
    std::vector<at::Tensor> outputs{tensors.front()};
    return c10::make_intrusive<GpuWork>(group_.getRank(), type, op, comm_.unwrap(), done,
                                        captured, outputs, [this] { return deviceError(); });
  }

  ProcessGroupXccl& group_;
  const int device_;
  c10::cuda::CUDAStream comm_;
  const algo::GpuTunables tunables_;
  Placement placement_;
  std::mutex mutex_;  // guards the lazily created members below
  std::unique_ptr<Workspace> workspace_;
  uint32_t* errorCopy_ = nullptr;  // pinned host copy of the workspace's error word
  c10::intrusive_ptr<c10d::Backend> vendor_;
  bool vendorTried_ = false;
  std::atomic<bool> coalescing_{false};  // between startCoalescing and endCoalescing
  InFlight inFlight_;
};

}  // namespace

std::unique_ptr<GpuOps> makeGpuOps(ProcessGroupXccl& group, int device) {
  return std::make_unique<GpuPath>(group, device);
}

}  // namespace xccl::backend
