// HostRoute (gpu_host_route.h): a GPU call through host memory and the CPU side.
#include "backend/gpu/gpu_host_route.h"

#include <c10/util/Exception.h>

#include "backend/core/group_core.h"
#include "backend/gpu/gpu_stream.h"
#include "backend/gpu/gpu_work.h"

namespace xccl::backend {

c10::intrusive_ptr<c10d::Work> HostRoute::run(const char* op, const LibraryCall& call,
                                              const std::vector<at::Tensor*>& args,
                                              const std::vector<at::Tensor*>& outputs) {
  TORCH_CHECK(!capturing(shared_.device), "xccl ", op,
              ": this call would go through host memory, which "
              "cannot be captured in a CUDA graph");
  GpuDeviceGuard deviceGuard(static_cast<c10::DeviceIndex>(shared_.device));
  std::lock_guard<std::timed_mutex> issue(shared_.issueMutex);
  GpuStream current = currentGpuStream(shared_.device);
  // The copies below synchronise the caller's stream: make it follow the other routes first.
  shared_.order->beforeCurrentStream(current.stream(), false);
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
    c10::intrusive_ptr<c10d::Work> hostWork = call.onHost(cpu_);
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
  std::shared_ptr<CudaEvent> done = shared_.events->take();
  XCCL_GPU_CHECK(ErrorKind::kSystem, XCCL_RT(EventRecord)(done->get(), current.stream()));
  auto work =
      c10::make_intrusive<GpuWork>(shared_.group.membership().rank(), type, op, current.unwrap(),
                                   done, false, results, shared_.error, std::nullopt);
  work->setSourceRank(source);
  return work;
}

}  // namespace xccl::backend
