#include "topo/nvml.h"

#include <dlfcn.h>

#include <cstring>

#include "common/logging.h"
#include "topo/sysfs.h"

namespace xccl::topo {
namespace {

// The slice of the NVML ABI we call, declared from NVML's documented interface (nvml.h). The
// layouts are stable across driver releases; buffers carry slack so a longer future struct
// cannot overrun them.
using NvmlDevice = void*;
constexpr int kSuccess = 0;
constexpr unsigned kMaxNvlinks = 18;               // NVML_NVLINK_MAX_LINKS
constexpr unsigned kFieldNvlinkState = 165;        // NVML_FI_DEV_NVLINK_GET_STATE
constexpr unsigned kRemoteDeviceSwitch = 2;        // NVML_NVLINK_DEVICE_TYPE_SWITCH
constexpr unsigned kFeatureEnabled = 1;            // NVML_FEATURE_ENABLED

struct PciInfo {  // nvmlPciInfo_t
  char busIdLegacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pciDeviceId;
  unsigned pciSubSystemId;
  char busId[32];
  unsigned slack[16];
};

struct Memory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct FieldValue {  // nvmlFieldValue_t
  unsigned fieldId;
  unsigned scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  int nvmlReturn;
  union {
    unsigned uiVal;
    unsigned long long ullVal;
  } value;
};
static_assert(sizeof(FieldValue) == 40, "nvmlFieldValue_t is 40 bytes");

template <typename Fn>
bool bind(void* handle, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(handle, name));
  return fn != nullptr;
}

}  // namespace

struct NvmlLibrary::Api {
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  int (*getCount)(unsigned*) = nullptr;
  int (*getHandleByIndex)(unsigned, NvmlDevice*) = nullptr;
  int (*getPciInfo)(NvmlDevice, PciInfo*) = nullptr;
  int (*getName)(NvmlDevice, char*, unsigned) = nullptr;
  int (*getComputeCapability)(NvmlDevice, int*, int*) = nullptr;
  int (*getMemoryInfo)(NvmlDevice, Memory*) = nullptr;
  // Optional: absent on old drivers (450.x lacks the remote device type).
  int (*getNvlinkState)(NvmlDevice, unsigned, unsigned*) = nullptr;
  int (*getNvlinkRemotePci)(NvmlDevice, unsigned, PciInfo*) = nullptr;
  int (*getNvlinkRemoteType)(NvmlDevice, unsigned, unsigned*) = nullptr;
  int (*getFieldValues)(NvmlDevice, int, FieldValue*) = nullptr;
};

double nvlinkGBpsPerLink(const std::string& arch) {
  // Per link and direction: NVLink 1 20 GB/s (P100), NVLink 2-4 25 GB/s (V100, A100, H100),
  // NVLink 3 on GA10x bridges about 14 GB/s, NVLink 5 50 GB/s (B200). NVIDIA product datasheets.
  if (arch == "sm60") return 20;
  if (arch == "sm70" || arch == "sm80" || arch == "sm90") return 25;
  if (arch == "sm86") return 14;
  if (arch == "sm100" || arch == "sm103") return 50;
  return 0;
}

std::unique_ptr<NvmlLibrary> NvmlLibrary::open() {
  void* handle = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return nullptr;
  auto api = std::make_unique<Api>();
  bool ok = bind(handle, "nvmlInit_v2", api->init) && bind(handle, "nvmlShutdown", api->shutdown) &&
            bind(handle, "nvmlDeviceGetCount_v2", api->getCount) &&
            bind(handle, "nvmlDeviceGetHandleByIndex_v2", api->getHandleByIndex) &&
            bind(handle, "nvmlDeviceGetPciInfo_v3", api->getPciInfo) &&
            bind(handle, "nvmlDeviceGetName", api->getName) &&
            bind(handle, "nvmlDeviceGetCudaComputeCapability", api->getComputeCapability) &&
            bind(handle, "nvmlDeviceGetMemoryInfo", api->getMemoryInfo);
  bind(handle, "nvmlDeviceGetNvLinkState", api->getNvlinkState);
  bind(handle, "nvmlDeviceGetNvLinkRemotePciInfo_v2", api->getNvlinkRemotePci);
  bind(handle, "nvmlDeviceGetNvLinkRemoteDeviceType", api->getNvlinkRemoteType);
  bind(handle, "nvmlDeviceGetFieldValues", api->getFieldValues);
  if (!ok) {
    XCCL_INFO("topo", "libnvidia-ml lacks a required symbol; NVLink discovery skipped");
    ::dlclose(handle);
    return nullptr;
  }
  int rc = api->init();
  if (rc != kSuccess) {
    XCCL_INFO("topo", "nvmlInit failed (", rc, "); NVLink discovery skipped");
    ::dlclose(handle);
    return nullptr;
  }
  return std::unique_ptr<NvmlLibrary>(new NvmlLibrary(handle, std::move(api)));
}

NvmlLibrary::NvmlLibrary(void* handle, std::unique_ptr<Api> api)
    : handle_(handle), api_(std::move(api)) {}

NvmlLibrary::~NvmlLibrary() {
  api_->shutdown();
  ::dlclose(handle_);
}

std::vector<NvmlGpuInfo> NvmlLibrary::gpus() const {
  std::vector<NvmlGpuInfo> result;
  unsigned count = 0;
  if (api_->getCount(&count) != kSuccess) return result;
  for (unsigned index = 0; index < count; ++index) {
    NvmlDevice device = nullptr;
    if (api_->getHandleByIndex(index, &device) != kSuccess) continue;
    NvmlGpuInfo info;
    PciInfo pci{};
    if (api_->getPciInfo(device, &pci) == kSuccess) {
      pci.busId[sizeof(pci.busId) - 1] = '\0';
      info.busId = normalizePciBusId(pci.busId);
    }
    char name[128] = {};
    if (api_->getName(device, name, sizeof(name) - 1) == kSuccess) info.name = name;
    int major = 0;
    int minor = 0;
    if (api_->getComputeCapability(device, &major, &minor) == kSuccess) {
      info.arch = "sm" + std::to_string(major * 10 + minor);
    }
    Memory memory{};
    if (api_->getMemoryInfo(device, &memory) == kSuccess) {
      info.memoryBytes = static_cast<int64_t>(memory.total);
    }
    for (unsigned link = 0; link < kMaxNvlinks && api_->getNvlinkRemotePci; ++link) {
      // Hopper and later report link state through the field-value interface (as NCCL reads
      // it); the older call is the fallback.
      bool active = false;
      FieldValue field{};
      field.fieldId = kFieldNvlinkState;
      field.scopeId = link;
      if (major >= 9 && api_->getFieldValues &&
          api_->getFieldValues(device, 1, &field) == kSuccess && field.nvmlReturn == kSuccess) {
        active = field.value.uiVal == kFeatureEnabled;
      } else if (api_->getNvlinkState) {
        unsigned state = 0;
        active = api_->getNvlinkState(device, link, &state) == kSuccess && state == kFeatureEnabled;
      }
      if (!active) continue;
      PciInfo remote{};
      if (api_->getNvlinkRemotePci(device, link, &remote) != kSuccess) continue;
      remote.busId[sizeof(remote.busId) - 1] = '\0';
      NvlinkEndpoint endpoint;
      endpoint.remoteBusId = normalizePciBusId(remote.busId);
      unsigned type = 0;
      endpoint.toSwitch = api_->getNvlinkRemoteType &&
                          api_->getNvlinkRemoteType(device, link, &type) == kSuccess &&
                          type == kRemoteDeviceSwitch;
      info.links.push_back(endpoint);
    }
    result.push_back(std::move(info));
  }
  return result;
}

}  // namespace xccl::topo
