// KernelVerification: whether the group may trust xccl's kernels (a part of the GPU side,
// gpu_path.h; docs/gpu.md, "Verified kernels" and "Ranks sharing a GPU"): what the ranks agree at
// creation (kernels verified on this machine, a time-sliced shared GPU, a MIG instance), and
// XCCL_GPU_VERIFY's comparison of every kernel result with the vendor's (or the host route's).
//
// Shared state it takes (gpu_shared.h): the placement (whether ranks share a GPU), the device,
// the tunables (whether XCCL_GPU_ALGO forces a kernel); the vendor and host routes run the
// reference calls.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "backend/gpu/gpu_host_route.h"
#include "backend/gpu/gpu_shared.h"
#include "backend/gpu/gpu_vendor_route.h"
#include "common/types.h"
#include "net/rendezvous/store.h"

namespace xccl::backend {

class KernelVerification {
 public:
  // What the ranks agreed at creation, alike on every rank.
  struct Agreement {
    bool kernelsVerified = false;  // rank 0's answer
    bool timeSliced = false;  // ranks share a GPU time-sliced on some rank's host
    std::string ipcRefused;  // why CUDA IPC is refused for the group; "" when it is not
  };
  // At creation, after the placement exchange (shared.placement): rank 0's answer on whether the
  // kernels are verified, any rank's time slicing, any rank's MIG instance (CUDA IPC refused);
  // warns once. Collective.
  static Agreement agree(net::Store& store, const GpuShared& shared);

  // What XCCL_GPU_VERIFY compares: the call's element type, reduction, size.
  struct Case {
    DataType dtype = DataType::kUInt8;
    ReduceOp op = ReduceOp::kSum;
    bool reduces = false;
    size_t bytes = 0;
  };

  KernelVerification(GpuShared& shared, VendorRoute& vendor, HostRoute& host)
      : shared_(shared), vendor_(vendor), host_(host) {}
  KernelVerification(const KernelVerification&) = delete;
  KernelVerification& operator=(const KernelVerification&) = delete;

  // With XCCL_GPU_VERIFY=1 outside graph capture: copies of `args` taken before the kernel
  // writes them (on the caller's stream); otherwise nothing.
  std::optional<std::vector<at::Tensor>> snapshot(const std::vector<at::Tensor*>& args);
  // `work` (the kernel route's) when `before` is empty; otherwise waits for it, runs the same call
  // on `before` through the vendor (host memory where ranks share a GPU) and raises a
  // DistBackendError naming op, dtype, size and rank when an output differs.
  c10::intrusive_ptr<c10d::Work> verifiedKernel(const char* op, const Case& what,
                                                const LibraryCall& call,
                                                std::optional<std::vector<at::Tensor>> before,
                                                const std::vector<at::Tensor*>& args,
                                                const std::vector<at::Tensor*>& outputs,
                                                c10::intrusive_ptr<c10d::Work> work);

 private:
  static bool verifyFromEnvironment();

  GpuShared& shared_;
  VendorRoute& vendor_;
  HostRoute& host_;
  const bool verify_ = verifyFromEnvironment();  // XCCL_GPU_VERIFY
};

}  // namespace xccl::backend
