// How this process shares its GPU with others, as far as xccl's kernels care (docs/gpu.md,
// "Ranks sharing a GPU"): whether an MPS control daemon runs (without one, the driver time-slices
// the contexts of several processes on one GPU, so a kernel that waits on a peer's blocks waits
// out whole time slices), and whether the GPU is a MIG instance (which refuses CUDA IPC).
// Pure reads of the environment's text and of one directory, so tests pass faked inputs.
#pragma once

#include <string>

namespace xccl::topo {

// The MPS pipe directory: CUDA_MPS_PIPE_DIRECTORY's value when set and not empty (pass
// getenv's result, nullptr when unset), else the driver's default /tmp/nvidia-mps.
std::string mpsPipeDirectory(const char* pipeDirectoryVariable);

// True when `pipeDirectory` holds the control daemon's named pipe "control" (a FIFO): the daemon
// creates it at start and removes it at a clean exit. A daemon that died leaves it behind, which
// reads as running: CUDA then falls back to time slicing without telling, as before this check.
bool mpsControlDaemonRunning(const std::string& pipeDirectory);

// "MIG-..." (nvidia-smi -L's and NVML's spelling of a MIG instance; "GPU-..." for a whole GPU).
bool isMigUuid(const std::string& uuid);

// True for a device name as CUDA reports a MIG instance's: the GPU's name followed by its profile,
// "NVIDIA A100-SXM4-40GB MIG 1g.5gb" (what CUDA shows when MIG instances are not chosen by UUID).
bool isMigDeviceName(const std::string& name);

// True when the CUDA_VISIBLE_DEVICES text (nullptr when unset) selects MIG instances: any of its
// comma-separated entries is a MIG UUID (CUDA exposes MIG instances only by UUID).
bool visibleDevicesAreMig(const char* visibleDevices);

}  // namespace xccl::topo
