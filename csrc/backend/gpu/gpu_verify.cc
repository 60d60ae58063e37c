// KernelVerification (gpu_verify.h): whether the group may use xccl's kernels at all, and the
// debug comparison of every kernel result with the vendor's (docs/gpu.md, "Verified kernels" and
// "Ranks sharing a GPU").
//
// At creation the ranks agree on three facts that planGpu takes as inputs:
//  - kernels verified on this machine: rank 0's answer (its cache's stamp or the known-good
//    list, python/xccl/verify.py) for every rank, so that no rank plans a kernel its peers do not;
//  - ranks sharing a GPU time-sliced (no MPS control daemon): true when any rank's host has none;
//  - a MIG instance on any rank: CUDA IPC is refused there, so the kernels are off for the group.
#include "backend/gpu/gpu_verify.h"
#include "common/gpu_runtime.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "backend/core/group_core.h"
#include "backend/core/torch_error.h"
#include "common/env.h"
#include "common/logging.h"
#include "net/rendezvous/agree.h"
#include "net/rendezvous/bootstrap.h"
#include "topo/gpu_sharing.h"

namespace xccl::backend {
namespace {

bool migDevice(int device) {
  if (topo::visibleDevicesAreMig(std::getenv("CUDA_VISIBLE_DEVICES"))) return true;
  gpuDeviceProp_t props = {};
  if (XCCL_RT(GetDeviceProperties)(&props, device) != gpuSuccess) return false;
  return topo::isMigDeviceName(props.name);
}

// Where ranks sharing one GPU run concurrently without MPS: AMD's queues do; NVIDIA time-slices
// the contexts of different processes.
bool sharedGpuTimeSliced() {
#if XCCL_GPU_HIP
  return false;
#else
  return !topo::mpsControlDaemonRunning(
      topo::mpsPipeDirectory(std::getenv("CUDA_MPS_PIPE_DIRECTORY")));
#endif
}

}  // namespace

KernelVerification::Agreement KernelVerification::agree(net::Store& store,
                                                        const GpuShared& shared) {
  GroupCore& group = shared.group;
  const Placement& placement = shared.placement;
  Agreement agreed;
  const int rank = group.membership().rank();
  const KernelCheckResult mine = group.policy().checkKernels();
  const net::RankZeroVerdict verdict =
      net::agreeOnRankZero(store, "gpu_verified", rank, group.membership().size(),
                           mine.verified ? "1" : "0", group.sequencer().timeout());
  agreed.kernelsVerified = verdict.value == "1";
  if (agreed.kernelsVerified != mine.verified) {
    XCCL_WARN("backend", "group '", group.membership().groupName(),
              "': this rank finds xccl's GPU kernels ", mine.verified ? "verified" : "not verified",
              " (", mine.why, "), rank 0 does not; the group follows rank 0");
  }
  const bool forced = shared.tunables.gpuForced != algo::GpuForce::kAuto &&
                      shared.tunables.gpuForced != algo::GpuForce::kVendor;
  if (rank == 0 && !agreed.kernelsVerified && !forced) {
    static std::once_flag told;
    std::call_once(told, [&] {
      XCCL_WARN("backend", "xccl's GPU kernels were not verified on this machine (", mine.why,
                "): CUDA collectives use NCCL/RCCL. To verify them here: python -m xccl doctor "
                "--gpu; XCCL_GPU_ALGO=kernel uses them without verification");
    });
  }

  // One record per rank: time-sliced on a shared GPU, a MIG instance. Any rank's "1" counts.
  const bool sliced = placement.ranksPerGpu > 1 && sharedGpuTimeSliced();
  const std::vector<std::string> all =
      net::Bootstrap(store, "", rank, group.membership().size(), group.sequencer().timeout())
          .allGather("gpu_sharing",
                     std::string(sliced ? "1" : "0") + (migDevice(shared.device) ? "1" : "0"));
  bool anySliced = false, anyMig = false;
  for (const std::string& record : all) {
    anySliced = anySliced || (record.size() > 0 && record[0] == '1');
    anyMig = anyMig || (record.size() > 1 && record[1] == '1');
  }
  agreed.timeSliced = anySliced;
  if (anySliced && rank == 0) {
    static std::once_flag told;
    std::call_once(told, [&] {
      XCCL_WARN("backend", placement.ranksPerGpu,
                " ranks share a GPU and no MPS control daemon runs (nvidia-cuda-mps-control -d): "
                "the driver time-slices them, so GPU collectives go through host memory unless "
                "XCCL_GPU_ALGO names a kernel");
    });
  }
  if (anyMig) {
    agreed.ipcRefused = "a rank's GPU is a MIG instance, which refuses CUDA IPC";
    if (rank == 0) {
      XCCL_WARN("backend", "group '", group.membership().groupName(),
                "': xccl's GPU kernels are off: ", agreed.ipcRefused);
    }
  }
  return agreed;
}

namespace {

// Sums round differently in another order: a tolerance per dtype, scaled by the world size.
// Copies, min and max must match bit for bit.
bool exactFor(DataType dtype, ReduceOp op, bool reduces) {
  if (!reduces) return true;
  if (dtype != DataType::kFloat32 && dtype != DataType::kFloat16 && dtype != DataType::kBFloat16) {
    return true;
  }
  return op == ReduceOp::kMin || op == ReduceOp::kMax;
}

double toleranceFor(DataType dtype, int world) {
  const double unit = dtype == DataType::kFloat32   ? 1.2e-7
                      : dtype == DataType::kFloat16 ? 9.8e-4
                                                    : 7.9e-3;  // bfloat16
  return unit * 4.0 * static_cast<double>(world);
}

// "" when alike, else where they first differ.
std::string firstDifference(const at::Tensor& kernel, const at::Tensor& reference, bool exact,
                            double tolerance) {
  at::Tensor a = kernel.detach().reshape(-1).cpu();
  at::Tensor b = reference.detach().reshape(-1).cpu();
  if (a.numel() != b.numel()) {
    return c10::str(a.numel(), " elements from the kernel, ", b.numel(), " from the reference");
  }
  at::Tensor bad;
  if (exact) {
    bad = a.contiguous().view(at::kByte).ne(b.contiguous().view(at::kByte)).nonzero();
    if (bad.numel() == 0) return "";
    const int64_t byte = bad[0].item<int64_t>();
    return c10::str("byte ", byte, " of ", a.numel() * a.element_size(), " (element ",
                    byte / a.element_size(), ": ", a[byte / a.element_size()].item<double>(),
                    " vs ", b[byte / a.element_size()].item<double>(), ")");
  }
  at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
  bad = at::isclose(x, y, tolerance, tolerance, /*equal_nan=*/true).logical_not().nonzero();
  if (bad.numel() == 0) return "";
  const int64_t i = bad[0].item<int64_t>();
  return c10::str("element ", i, " of ", a.numel(), ": ", x[i].item<double>(), " vs ",
                  y[i].item<double>(), ", tolerance ", tolerance);
}

}  // namespace

std::optional<std::vector<at::Tensor>> KernelVerification::snapshot(
    const std::vector<at::Tensor*>& args) {
  if (!verify_) return std::nullopt;
  if (capturing(shared_.device)) {
    static std::once_flag told;
    std::call_once(told, [] {
      XCCL_WARN("backend", "XCCL_GPU_VERIFY: calls captured in a CUDA graph are not compared");
    });
    return std::nullopt;
  }
  // The inputs as they were: the kernel may write over them (all_reduce, broadcast in place).
  std::vector<at::Tensor> before;
  for (at::Tensor* t : args) before.push_back(t->clone());
  return before;
}

c10::intrusive_ptr<c10d::Work> KernelVerification::verifiedKernel(
    const char* op, const Case& what, const LibraryCall& call,
    std::optional<std::vector<at::Tensor>> before, const std::vector<at::Tensor*>& args,
    const std::vector<at::Tensor*>& outputs, c10::intrusive_ptr<c10d::Work> work) {
  if (!before) return work;
  work->wait();
  std::vector<at::Tensor> fromKernel;
  for (at::Tensor* t : outputs) fromKernel.push_back(t->clone());
  // The same call on the copies, through NCCL/RCCL where it serves this group, else host memory.
  const bool vendor = shared_.placement.ranksPerGpu == 1 && vendor_.group(op) != nullptr;
  std::vector<at::Tensor> originals;
  for (size_t i = 0; i < args.size(); ++i) {
    originals.push_back(*args[i]);
    *args[i] = (*before)[i];
  }
  std::vector<at::Tensor> fromReference;
  try {
    // Not through GpuPath::other(): the reference is no call of the user's, so no route is counted.
    (vendor ? vendor_.run(op, *vendor_.group(op), call) : host_.run(op, call, args, outputs))
        ->wait();
    for (at::Tensor* t : outputs) fromReference.push_back(*t);
  } catch (...) {
    for (size_t i = 0; i < args.size(); ++i) *args[i] = originals[i];
    throw;
  }
  for (size_t i = 0; i < args.size(); ++i) *args[i] = originals[i];
  const bool exact = exactFor(what.dtype, what.op, what.reduces);
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string where =
        firstDifference(fromKernel[i], fromReference[i], exact,
                        toleranceFor(what.dtype, shared_.group.membership().size()));
    if (where.empty()) continue;
    throwTorchError(ErrorKind::kInternal,
                    c10::str("xccl ", op, ": XCCL_GPU_VERIFY: the kernel's result differs from ",
                             vendor ? "NCCL/RCCL's" : "the host route's", " on rank ",
                             shared_.group.membership().rank(), " (", dataTypeName(what.dtype),
                             what.reduces ? std::string(" ") + reduceOpName(what.op)
                                          : std::string(),
                             ", ", what.bytes, " B): ", where));
  }
  return work;
}

bool KernelVerification::verifyFromEnvironment() { return env::getBool("XCCL_GPU_VERIFY"); }

}  // namespace xccl::backend
