// NVIDIA GPUs and their NVLinks through NVML, loaded with dlopen so that xccl neither links
// against nor requires the driver library. The calls used are the ones NCCL uses for the same
// purpose (NCCL reads GPUs and NVLinks through NVML when it detects the topology).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace xccl::topo {

struct NvlinkEndpoint {
  std::string remoteBusId;  // normalised "0000:07:00.0"
  bool toSwitch = false;    // NVML says the far end is an NVSwitch
};

struct NvmlGpuInfo {
  std::string busId;  // normalised
  std::string name;
  std::string arch;  // "sm90"
  int64_t memoryBytes = 0;
  std::vector<NvlinkEndpoint> links;  // active links only
};

class NvmlLibrary {
 public:
  // nullptr when libnvidia-ml is absent or its init fails (no driver, no GPU, no permission).
  static std::unique_ptr<NvmlLibrary> open();
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // Every GPU NVML enumerates; a GPU whose queries fail is still listed with what is known.
  std::vector<NvmlGpuInfo> gpus() const;

 private:
  struct Api;
  NvmlLibrary(void* handle, std::unique_ptr<Api> api);

  void* handle_;
  std::unique_ptr<Api> api_;
};

// Per-link NVLink bandwidth in GB/s, one direction, by architecture ("sm90" -> 25 for NVLink 4);
// 0 when unknown. H100 SXM: 18 links x 25 = 450 GB/s per direction (NVIDIA H100 datasheet).
double nvlinkGBpsPerLink(const std::string& arch);

}  // namespace xccl::topo
