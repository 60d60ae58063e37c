// The GPU side's five collectives with a kernel, and its creation (gpu_path.h says which file
// holds what).
#include "backend/gpu/gpu_path.h"
#include "backend/gpu/gpu_stream.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "backend/core/group_core.h"
#include "backend/core/store_adapter.h"
#include "backend/gpu/gpu_rules.h"
#include "common/env.h"
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
    : group_(group),
      cpu_(cpu),
      device_(device),
      comm_(gpuStreamFromPool(/*isHighPriority=*/true, device)),
      tunables_(group.membership().tunables()),
      blockingWait_(env::getBool("XCCL_GPU_BLOCKING_WAIT")) {
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(device_));
  StoreAdapter store(group_.membership().store(), "xccl/");
  placement_ =
      exchangePlacement(store, group_.membership().layout(), device, group_.sequencer().timeout());
  maxBlocks_ =
      algo::sharedGpuMaxBlocks(placement_.blocksPerSm, placement_.smCount, placement_.ranksPerGpu);
  groupRequest_.worldSize = group_.membership().size();
  groupRequest_.hosts = placement_.hosts;
  groupRequest_.ranksPerGpu = placement_.ranksPerGpu;
  groupRequest_.gpus = placement_.gpus;
  groupRequest_.kernelsFit = maxBlocks_ != algo::kCannotFit;
  agreeOnKernels(store);
  if (maxBlocks_ == algo::kCannotFit) {
    XCCL_WARN("backend", placement_.ranksPerGpu, " ranks share a GPU of ", placement_.smCount,
              " SMs: too few for every rank's kernel blocks at once; GPU collectives go through "
              "host memory");
  }
  error_ = std::make_shared<ErrorWord>(device_);
  events_ = EventPool::create(device_);
  order_ = std::make_unique<StreamOrder>(comm_, events_);
  watchdog_ =
      std::make_unique<Watchdog>(device_, error_, group_.sequencer().timeout(),
                                 [this](const std::string& why) { group_.markBroken(why); });
  // The vendor group is created now, outside any graph capture; constructing ProcessGroupNCCL
  // builds no NCCL communicator (NCCL's comes with its first collective, see vendorGroup).
  if (placement_.ranksPerGpu == 1) (void)vendorGroup("create");
}

GpuPath::~GpuPath() { shutdown(std::chrono::seconds(10)); }

Side::WorkPtr GpuPath::allreduce(std::vector<at::Tensor>& tensors,
                                 const c10d::AllreduceOptions& opts) {
  const char* name = "allreduce";
  at::Tensor tensor = single(tensors, name, home());
  checkHealthy(name);
  const GpuReduce reduce = toGpuReduce(opts.reduceOp, name, device_);
  const ElementView view = reduceView(tensor, reduce.spec, name);
  const algo::GpuPlan plan = planFor(algo::GpuCollective::kAllReduce, byteSize(tensor), view.type,
                                     reduce.spec.op, true, vendorReduces(reduce.spec.op));
  if (plan.route == algo::GpuRoute::kLocal) {
    // Every reduction of one input is the input, PREMUL_SUM's product aside.
    return solo(c10d::OpType::ALLREDUCE, name, tensor, [&] {
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
  args.shape = launchShape();
  const size_t elem = elementSize(view.type);
  std::vector<at::Tensor> keep{tensor};
  if (reduce.deviceFactor.defined()) keep.push_back(reduce.deviceFactor);
  std::optional<std::vector<at::Tensor>> before = snapshotForVerify({&tensors[0]});
  WorkPtr work = runKernel(c10d::OpType::ALLREDUCE, name, keep, [&](Workspace& ws) {
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
  return verifiedKernel(name, {view.type, reduce.spec.op, true, byteSize(tensor)}, viaLibrary,
                        std::move(before), {&tensors[0]}, {&tensors[0]}, std::move(work));
}

Side::WorkPtr GpuPath::broadcast(std::vector<at::Tensor>& tensors,
                                 const c10d::BroadcastOptions& opts) {
  const char* name = "broadcast";
  at::Tensor tensor = single(tensors, name, home());
  checkRoot(opts.rootRank, group_.membership().size(), name);
  checkHealthy(name);
  const size_t bytes = byteSize(tensor);
  const algo::GpuPlan plan =
      planFor(algo::GpuCollective::kBroadcast, bytes, DataType::kUInt8, ReduceOp::kSum);
  if (plan.route == algo::GpuRoute::kLocal) {
    return solo(c10d::OpType::BROADCAST, name, tensor, [] {});
  }
  auto viaLibrary = [&](auto& b) { return b.broadcast(tensors, opts); };
  if (plan.route != algo::GpuRoute::kKernel) {
    return other(name, plan.route, plan.reason.c_str(), viaLibrary, {&tensors[0]}, {&tensors[0]});
  }
  const int root = static_cast<int>(opts.rootRank);
  std::optional<std::vector<at::Tensor>> before = snapshotForVerify({&tensors[0]});
  WorkPtr work = runKernel(c10d::OpType::BROADCAST, name, {tensor}, [&](Workspace& ws) {
    const size_t perChunk = ws.layout().dataBytes;
    auto* data = static_cast<char*>(tensor.data_ptr());
    for (size_t base = 0; base < bytes; base += perChunk) {
      const size_t count = std::min(perChunk, bytes - base);
      if (group_.membership().rank() == root) copyIn(ws, data + base, count);
      kernels::BroadcastArgs args;
      args.handle = handle(ws);
      args.output = data + base;
      args.count = count;
      args.dtype = DataType::kUInt8;
      args.root = root;
      args.shape = launchShape();
      kernels::launchBroadcast(args, comm_.stream());
    }
  });
  return verifiedKernel(name, {DataType::kUInt8, ReduceOp::kSum, false, bytes}, viaLibrary,
                        std::move(before), {&tensors[0]}, {&tensors[0]}, std::move(work));
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
  checkFlatPair(output, "output", input, "input", group_.membership().size(), name);
  checkHealthy(name);
  const size_t bytes = byteSize(input);
  const algo::GpuPlan plan =
      planFor(algo::GpuCollective::kAllGather, byteSize(output), DataType::kUInt8, ReduceOp::kSum);
  if (plan.route == algo::GpuRoute::kLocal) {
    return solo(c10d::OpType::_ALLGATHER_BASE, name, output, [&] {
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
  std::optional<std::vector<at::Tensor>> before = snapshotForVerify({&inputs[0], &outputs[0]});
  WorkPtr work =
      runKernel(c10d::OpType::_ALLGATHER_BASE, name, {output, input}, [&](Workspace& ws) {
        copyIn(ws, input.data_ptr(), bytes);
        kernels::AllGatherArgs args;
        args.handle = handle(ws);
        args.output = output.data_ptr();
        args.count = bytes;
        args.dtype = DataType::kUInt8;
        args.shape = launchShape();
        kernels::launchAllGather(args, comm_.stream());
      });
  return verifiedKernel(name, {DataType::kUInt8, ReduceOp::kSum, false, byteSize(output)},
                        viaLibrary, std::move(before), {&inputs[0], &outputs[0]}, {&outputs[0]},
                        std::move(work));
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
  checkFlatPair(input, "input", output, "output", group_.membership().size(), name);
  checkHealthy(name);
  const GpuReduce reduce = toGpuReduce(opts.reduceOp, name, device_);
  const ElementView view = reduceView(output, reduce.spec, name);
  const size_t bytes = byteSize(input);
  const algo::GpuPlan plan = planFor(algo::GpuCollective::kReduceScatter, bytes, view.type,
                                     reduce.spec.op, true, vendorReduces(reduce.spec.op));
  if (plan.route == algo::GpuRoute::kLocal) {
    return solo(c10d::OpType::_REDUCE_SCATTER_BASE, name, output,
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
  std::optional<std::vector<at::Tensor>> before = snapshotForVerify({&inputs[0], &outputs[0]});
  WorkPtr work = runKernel(c10d::OpType::_REDUCE_SCATTER_BASE, name, keep, [&](Workspace& ws) {
    copyIn(ws, input.data_ptr(), bytes);
    kernels::ReduceScatterArgs args;
    args.handle = handle(ws);
    args.output = output.data_ptr();
    args.count = view.count;
    args.dtype = view.type;
    args.op = reduce.spec.op;
    args.preMulFactor = static_cast<float>(reduce.spec.factor.value_or(1.0));
    if (reduce.deviceFactor.defined()) {
      args.preMulFactorOnDevice = reduce.deviceFactor.data_ptr<float>();
    }
    args.shape = launchShape();
    kernels::launchReduceScatter(args, comm_.stream());
  });
  return verifiedKernel(name, {view.type, reduce.spec.op, true, bytes}, viaLibrary,
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
  checkHealthy(name);
  const int size = group_.membership().size();
  auto rows = [](const at::Tensor& t) { return t.dim() == 0 ? int64_t{1} : t.size(0); };
  // Torch's equal form only (algo::kernelAllToAll): explicit split lists go to NCCL/RCCL.
  const bool even = algo::kernelAllToAll(rows(input), input.numel(), rows(output), output.numel(),
                                         inputSplits, outputSplits, size);
  const size_t bytes = byteSize(input);
  const algo::GpuPlan plan =
      planFor(algo::GpuCollective::kAllToAll, bytes, DataType::kUInt8, ReduceOp::kSum, even);
  if (plan.route == algo::GpuRoute::kLocal) {
    return solo(c10d::OpType::ALLTOALL_BASE, name, output, [&] {
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
  std::optional<std::vector<at::Tensor>> before = snapshotForVerify(args);
  WorkPtr work = runKernel(c10d::OpType::ALLTOALL_BASE, name, {output, input}, [&](Workspace& ws) {
    copyIn(ws, input.data_ptr(), bytes);
    kernels::AllToAllArgs a;
    a.handle = handle(ws);
    a.output = output.data_ptr();
    a.count = bytes / size;
    a.dtype = DataType::kUInt8;
    a.shape = launchShape();
    kernels::launchAllToAll(a, comm_.stream());
  });
  return verifiedKernel(name, {DataType::kUInt8, ReduceOp::kSum, false, bytes}, viaLibrary,
                        std::move(before), args, {&output}, std::move(work));
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
