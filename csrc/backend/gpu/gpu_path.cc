// GpuPath: its creation, the five collectives with a kernel, shutdown and abort (gpu_path.h says
// which file holds what).
#include "backend/gpu/gpu_path.h"
#include "backend/gpu/gpu_stream.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "backend/core/group_core.h"
#include "backend/core/store_adapter.h"
#include "backend/gpu/gpu_rules.h"
#include "common/logging.h"

namespace xccl::backend {
namespace {

// PREMUL_SUM at world size 1, or the factor alone: x * factor, on the caller's stream.
void scale(at::Tensor& out, const at::Tensor& in, const GpuReduce& reduce) {
  if (reduce.deviceFactor.defined()) {
    at::mul_out(out, in, reduce.deviceFactor);
  } else if (reduce.spec.factor.has_value()) {
    // A CPU 0-dim operand: a scalar to CUDA kernels, no copy to the device.
    at::mul_out(out, in, at::scalar_tensor(*reduce.spec.factor, at::kDouble));
  } else if (!out.is_same(in)) {
    out.copy_(in);
  }
}

}  // namespace

GpuPath::GpuPath(GroupCore& group, Side& cpu, int device)
    : shared_(group, device, group.membership().tunables()),
      session_(shared_, counts_),
      vendor_(shared_),
      host_(shared_, cpu),
      local_(shared_, counts_),
      verification_(shared_, vendor_, host_),
      choice_(shared_, session_, vendor_) {
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device));
  StoreAdapter store(group.membership().store(), "xccl/");
  shared_.placement =
      exchangePlacement(store, group.membership().layout(), device, group.sequencer().timeout());
  const Placement& placement = shared_.placement;
  const int maxBlocks =
      algo::sharedGpuMaxBlocks(placement.blocksPerSm, placement.smCount, placement.ranksPerGpu);
  algo::GpuRequest groupRequest;
  groupRequest.worldSize = group.membership().size();
  groupRequest.hosts = placement.hosts;
  groupRequest.ranksPerGpu = placement.ranksPerGpu;
  groupRequest.gpus = placement.gpus;
  groupRequest.kernelsFit = maxBlocks != algo::kCannotFit;
  const KernelVerification::Agreement agreed = KernelVerification::agree(store, shared_);
  groupRequest.kernelsVerified = agreed.kernelsVerified;
  groupRequest.timeSliced = agreed.timeSliced;
  if (!agreed.ipcRefused.empty()) session_.refuseIpc(agreed.ipcRefused);
  choice_.fixGroup(groupRequest, maxBlocks);
  if (maxBlocks == algo::kCannotFit) {
    XCCL_WARN("backend", placement.ranksPerGpu, " ranks share a GPU of ", placement.smCount,
              " SMs: too few for every rank's kernel blocks at once; GPU collectives go through "
              "host memory");
  }
  shared_.error = std::make_shared<ErrorWord>(device);
  shared_.events = EventPool::create(device);
  shared_.order = std::make_unique<StreamOrder>(shared_.comm, shared_.events);
  session_.start();
  // The vendor group is created now, outside any graph capture; constructing ProcessGroupNCCL
  // builds no NCCL communicator (NCCL's comes with its first collective, see VendorRoute).
  if (placement.ranksPerGpu == 1) (void)vendor_.group("create");
}

GpuPath::~GpuPath() { shutdown(std::chrono::seconds(10)); }

void GpuPath::shutdown(std::chrono::milliseconds timeout) {
  // One deadline for every step, so the whole shutdown stays within `timeout`.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // A host-route call holds the issue lock for a whole CPU collective: wait for it only until
  // the deadline (the drain then aborts whatever still runs).
  std::unique_lock<std::timed_mutex> issue(shared_.issueMutex, deadline);
  if (!issue.owns_lock()) XCCL_WARN("backend", "GPU shutdown: a call still in progress");
  if (shutDown_.exchange(true)) return;  // once: shutdown() and then the destructor
  vendor_.shutdown();
  session_.shutdown(deadline);
}

void GpuPath::abort() {
  // Kernels spinning on flags return at their next poll; every later call and wait raises.
  shared_.error->abort();
  vendor_.abort();
}

Side::WorkPtr GpuPath::allreduce(std::vector<at::Tensor>& tensors,
                                 const c10d::AllreduceOptions& opts) {
  const char* name = "allreduce";
  at::Tensor tensor = single(tensors, name, home());
  shared_.checkHealthy(name);
  const GpuReduce reduce = toGpuReduce(opts.reduceOp, name, shared_.device);
  const ElementView view = reduceView(tensor, reduce.spec, name);
  const algo::GpuPlan plan =
      choice_.planFor(algo::GpuCollective::kAllReduce, byteSize(tensor), view.type, reduce.spec.op,
                      true, vendorReduces(reduce.spec.op));
  if (plan.route == algo::GpuRoute::kLocal) {
    // Every reduction of one input is the input, PREMUL_SUM's product aside.
    return local_.run(c10d::OpType::ALLREDUCE, name, tensor, [&] {
      if (reduce.spec.op == ReduceOp::kPreMulSum) scale(tensor, tensor, reduce);
    });
  }
  auto viaLibrary = [&](auto& b) { return b.allreduce(tensors, opts); };
  if (plan.route != algo::GpuRoute::kKernel) {
    return other(name, plan.route, plan.reason.c_str(), viaLibrary, {&tensors[0]}, {&tensors[0]});
  }
  kernels::AllReduceArgs args;
  args.dtype = view.type;
  args.op = reduce.spec.op;
  args.preMulFactor = static_cast<float>(reduce.spec.factor.value_or(1.0));
  if (reduce.deviceFactor.defined()) {
    args.preMulFactorOnDevice = reduce.deviceFactor.data_ptr<float>();
  }
  args.algorithm = rules::allReduceAlgorithm(plan.kernel);
  args.shape = choice_.launchShape();
  const size_t elem = elementSize(view.type);
  std::vector<at::Tensor> keep{tensor};
  if (reduce.deviceFactor.defined()) keep.push_back(reduce.deviceFactor);
  std::optional<std::vector<at::Tensor>> before = verification_.snapshot({&tensors[0]});
  WorkPtr work = session_.runKernel(c10d::OpType::ALLREDUCE, name, keep, [&](Workspace& ws) {
    const size_t perChunk = ws.layout().dataBytes / elem;
    auto* data = static_cast<char*>(tensor.data_ptr());
    for (size_t base = 0; base < view.count; base += perChunk) {
      const size_t count = std::min(perChunk, view.count - base);
      session_.copyIn(ws, data + base * elem, count * elem);
      args.handle = session_.handle(ws);
      args.output = data + base * elem;
      args.count = count;
      kernels::launchAllReduce(args, shared_.comm.stream());
    }
  });
  return verification_.verifiedKernel(name, {view.type, reduce.spec.op, true, byteSize(tensor)},
                                      viaLibrary, std::move(before), {&tensors[0]}, {&tensors[0]},
                                      std::move(work));
}

Side::WorkPtr GpuPath::broadcast(std::vector<at::Tensor>& tensors,
                                 const c10d::BroadcastOptions& opts) {
  const char* name = "broadcast";
  at::Tensor tensor = single(tensors, name, home());
  checkRoot(opts.rootRank, shared_.group.membership().size(), name);
  shared_.checkHealthy(name);
  const size_t bytes = byteSize(tensor);
  const algo::GpuPlan plan =
      choice_.planFor(algo::GpuCollective::kBroadcast, bytes, DataType::kUInt8, ReduceOp::kSum);
  if (plan.route == algo::GpuRoute::kLocal) {
    return local_.run(c10d::OpType::BROADCAST, name, tensor, [] {});
  }
  auto viaLibrary = [&](auto& b) { return b.broadcast(tensors, opts); };
  if (plan.route != algo::GpuRoute::kKernel) {
    return other(name, plan.route, plan.reason.c_str(), viaLibrary, {&tensors[0]}, {&tensors[0]});
  }
  const int root = static_cast<int>(opts.rootRank);
  std::optional<std::vector<at::Tensor>> before = verification_.snapshot({&tensors[0]});
  WorkPtr work = session_.runKernel(c10d::OpType::BROADCAST, name, {tensor}, [&](Workspace& ws) {
    const size_t perChunk = ws.layout().dataBytes;
    auto* data = static_cast<char*>(tensor.data_ptr());
    for (size_t base = 0; base < bytes; base += perChunk) {
      const size_t count = std::min(perChunk, bytes - base);
      if (shared_.group.membership().rank() == root) session_.copyIn(ws, data + base, count);
      kernels::BroadcastArgs args;
      args.handle = session_.handle(ws);
      args.output = data + base;
      args.count = count;
      args.dtype = DataType::kUInt8;
      args.root = root;
      args.shape = choice_.launchShape();
      kernels::launchBroadcast(args, shared_.comm.stream());
    }
  });
  return verification_.verifiedKernel(name, {DataType::kUInt8, ReduceOp::kSum, false, bytes},
                                      viaLibrary, std::move(before), {&tensors[0]}, {&tensors[0]},
                                      std::move(work));
}

Side::WorkPtr GpuPath::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllgatherOptions& opts) {
  if (outputs.size() == 1 && inputs.size() == 1) {
    return allgatherBase(outputs[0], inputs[0], opts);
  }
  return withoutKernel(
      "allgather_into_tensor",
      [&](auto& b) { return b.allgather_into_tensor_coalesced(outputs, inputs, opts); },
      pointers(outputs, inputs), pointers(outputs));
}

Side::WorkPtr GpuPath::allgatherBase(at::Tensor& output, at::Tensor& input,
                                     const c10d::AllgatherOptions& opts) {
  const char* name = "allgather_into_tensor";
  checkTensor(input, name, "input", home());
  checkTensor(output, name, "output", home());
  checkFlatPair(output, "output", input, "input", shared_.group.membership().size(), name);
  shared_.checkHealthy(name);
  const size_t bytes = byteSize(input);
  const algo::GpuPlan plan = choice_.planFor(algo::GpuCollective::kAllGather, byteSize(output),
                                             DataType::kUInt8, ReduceOp::kSum);
  if (plan.route == algo::GpuRoute::kLocal) {
    return local_.run(c10d::OpType::_ALLGATHER_BASE, name, output, [&] {
      if (!output.is_same(input)) output.copy_(input);
    });
  }
  std::vector<at::Tensor> outputs{output}, inputs{input};
  auto viaLibrary = [&](auto& b) {
    return b.allgather_into_tensor_coalesced(outputs, inputs, opts);
  };
  if (plan.route != algo::GpuRoute::kKernel) {
    return other(name, plan.route, plan.reason.c_str(), viaLibrary, {&inputs[0], &outputs[0]},
                 {&outputs[0]});
  }
  std::optional<std::vector<at::Tensor>> before = verification_.snapshot({&inputs[0], &outputs[0]});
  WorkPtr work =
      session_.runKernel(c10d::OpType::_ALLGATHER_BASE, name, {output, input}, [&](Workspace& ws) {
        session_.copyIn(ws, input.data_ptr(), bytes);
        kernels::AllGatherArgs args;
        args.handle = session_.handle(ws);
        args.output = output.data_ptr();
        args.count = bytes;
        args.dtype = DataType::kUInt8;
        args.shape = choice_.launchShape();
        kernels::launchAllGather(args, shared_.comm.stream());
      });
  return verification_.verifiedKernel(name,
                                      {DataType::kUInt8, ReduceOp::kSum, false, byteSize(output)},
                                      viaLibrary, std::move(before), {&inputs[0], &outputs[0]},
                                      {&outputs[0]}, std::move(work));
}

Side::WorkPtr GpuPath::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor";
  if (outputs.size() == 1 && inputs.size() == 1) {
    return reduceScatterBase(outputs[0], inputs[0], opts);
  }
  return withoutKernel(
      name, [&](auto& b) { return b.reduce_scatter_tensor_coalesced(outputs, inputs, opts); },
      pointers(outputs, inputs), pointers(outputs), vendorReduces(reduceOpOf(opts.reduceOp, name)));
}

Side::WorkPtr GpuPath::reduceScatterBase(at::Tensor& output, at::Tensor& input,
                                         const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor";
  checkTensor(input, name, "input", home());
  checkTensor(output, name, "output", home());
  checkFlatPair(input, "input", output, "output", shared_.group.membership().size(), name);
  shared_.checkHealthy(name);
  const GpuReduce reduce = toGpuReduce(opts.reduceOp, name, shared_.device);
  const ElementView view = reduceView(output, reduce.spec, name);
  const size_t bytes = byteSize(input);
  const algo::GpuPlan plan = choice_.planFor(algo::GpuCollective::kReduceScatter, bytes, view.type,
                                             reduce.spec.op, true, vendorReduces(reduce.spec.op));
  if (plan.route == algo::GpuRoute::kLocal) {
    return local_.run(c10d::OpType::_REDUCE_SCATTER_BASE, name, output,
                      [&] { scale(output, input, reduce); });
  }
  std::vector<at::Tensor> outputs{output}, inputs{input};
  auto viaLibrary = [&](auto& b) {
    return b.reduce_scatter_tensor_coalesced(outputs, inputs, opts);
  };
  if (plan.route != algo::GpuRoute::kKernel) {
    return other(name, plan.route, plan.reason.c_str(), viaLibrary, {&inputs[0], &outputs[0]},
                 {&outputs[0]});
  }
  std::vector<at::Tensor> keep{output, input};
  if (reduce.deviceFactor.defined()) keep.push_back(reduce.deviceFactor);
  std::optional<std::vector<at::Tensor>> before = verification_.snapshot({&inputs[0], &outputs[0]});
  WorkPtr work =
      session_.runKernel(c10d::OpType::_REDUCE_SCATTER_BASE, name, keep, [&](Workspace& ws) {
        session_.copyIn(ws, input.data_ptr(), bytes);
        kernels::ReduceScatterArgs args;
        args.handle = session_.handle(ws);
        args.output = output.data_ptr();
        args.count = view.count;
        args.dtype = view.type;
        args.op = reduce.spec.op;
        args.preMulFactor = static_cast<float>(reduce.spec.factor.value_or(1.0));
        if (reduce.deviceFactor.defined()) {
          args.preMulFactorOnDevice = reduce.deviceFactor.data_ptr<float>();
        }
        args.shape = choice_.launchShape();
        kernels::launchReduceScatter(args, shared_.comm.stream());
      });
  return verification_.verifiedKernel(name, {view.type, reduce.spec.op, true, bytes}, viaLibrary,
                                      std::move(before), {&inputs[0], &outputs[0]}, {&outputs[0]},
                                      std::move(work));
}

Side::WorkPtr GpuPath::alltoall_base(at::Tensor& output, at::Tensor& input,
                                     std::vector<int64_t>& outputSplits,
                                     std::vector<int64_t>& inputSplits,
                                     const c10d::AllToAllOptions& opts) {
  const char* name = "alltoall_base";
  checkTensor(input, name, "input", home());
  checkTensor(output, name, "output", home());
  shared_.checkHealthy(name);
  const int size = shared_.group.membership().size();
  auto rows = [](const at::Tensor& t) { return t.dim() == 0 ? int64_t{1} : t.size(0); };
  // Torch's equal form only (algo::kernelAllToAll): explicit split lists go to NCCL/RCCL.
  const bool even = algo::kernelAllToAll(rows(input), input.numel(), rows(output), output.numel(),
                                         inputSplits, outputSplits, size);
  const size_t bytes = byteSize(input);
  const algo::GpuPlan plan = choice_.planFor(algo::GpuCollective::kAllToAll, bytes,
                                             DataType::kUInt8, ReduceOp::kSum, even);
  if (plan.route == algo::GpuRoute::kLocal) {
    return local_.run(c10d::OpType::ALLTOALL_BASE, name, output, [&] {
      if (!output.is_same(input)) output.copy_(input);
    });
  }
  std::vector<at::Tensor*> args{&input, &output};
  auto viaLibrary = [&](auto& b) {
    return b.alltoall_base(output, input, outputSplits, inputSplits, opts);
  };
  if (plan.route != algo::GpuRoute::kKernel) {
    return other(name, plan.route, plan.reason.c_str(), viaLibrary, args, {&output});
  }
  checkSameDtype(input, output, name);
  std::optional<std::vector<at::Tensor>> before = verification_.snapshot(args);
  WorkPtr work =
      session_.runKernel(c10d::OpType::ALLTOALL_BASE, name, {output, input}, [&](Workspace& ws) {
        session_.copyIn(ws, input.data_ptr(), bytes);
        kernels::AllToAllArgs a;
        a.handle = session_.handle(ws);
        a.output = output.data_ptr();
        a.count = bytes / size;
        a.dtype = DataType::kUInt8;
        a.shape = choice_.launchShape();
        kernels::launchAllToAll(a, shared_.comm.stream());
      });
  return verification_.verifiedKernel(name, {DataType::kUInt8, ReduceOp::kSum, false, bytes},
                                      viaLibrary, std::move(before), args, {&output},
                                      std::move(work));
}

std::unique_ptr<GpuSide> makeGpuSide(GroupCore& group, Side& cpu, int device) {
  // Creating the GPU side exchanges through the store and allocates pinned memory, neither of
  // which a CUDA graph capture allows (it would invalidate the user's capture): refuse first.
  TORCH_CHECK(!capturing(device),
              "xccl: the first GPU collective of a group sets up its GPU "
              "side (device memory shared with the peers, the NCCL/RCCL group), which cannot "
              "happen during CUDA graph capture; run the collectives once before capturing");
  return std::make_unique<GpuPath>(group, cpu, device);
}

}  // namespace xccl::backend
