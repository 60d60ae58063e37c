#include "topo/amdsmi.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "common/logging.h"

namespace xccl::topo {
namespace {

// The slice of amdsmi's C interface (amdsmi.h) used here. Handles are opaque pointers; the BDF
// is a 64-bit word with function in bits 2:0, device 7:3, bus 15:8 and domain above.
constexpr int kSuccess = 0;
constexpr uint64_t kInitAmdGpus = 1u << 1;  // AMDSMI_INIT_AMD_GPUS
using Handle = void*;

// amdsmi_asic_info_t starts with the market name; its length grew from 64 to 256 bytes across
// releases and fields follow it, so the buffer is far larger than any version of the struct.
struct AsicInfoBuffer {
  char marketName[256];
  unsigned char rest[4096];
};

template <typename Fn>
bool bind(void* handle, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(handle, name));
  return fn != nullptr;
}

bool printable(const std::string& text) {
  if (text.empty()) return false;
  for (unsigned char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

std::map<std::string, std::string> amdGpuNames() {
  std::map<std::string, std::string> names;
  void* library = ::dlopen("libamd_smi.so", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) library = ::dlopen("/opt/rocm/lib/libamd_smi.so", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return names;
  int (*init)(uint64_t) = nullptr;
  int (*shutdown)() = nullptr;
  int (*sockets)(uint32_t*, Handle*) = nullptr;
  int (*processors)(Handle, uint32_t*, Handle*) = nullptr;
  int (*bdf)(Handle, uint64_t*) = nullptr;
  int (*asicInfo)(Handle, AsicInfoBuffer*) = nullptr;
  bool ok = bind(library, "amdsmi_init", init) && bind(library, "amdsmi_shut_down", shutdown) &&
            bind(library, "amdsmi_get_socket_handles", sockets) &&
            bind(library, "amdsmi_get_processor_handles", processors) &&
            bind(library, "amdsmi_get_gpu_device_bdf", bdf) &&
            bind(library, "amdsmi_get_gpu_asic_info", asicInfo);
  if (!ok || init(kInitAmdGpus) != kSuccess) {
    XCCL_INFO("topo", "amdsmi unusable; AMD GPU names come from sysfs alone");
    ::dlclose(library);
    return names;
  }
  uint32_t socketCount = 0;
  if (sockets(&socketCount, nullptr) == kSuccess && socketCount > 0 && socketCount < 1024) {
    std::vector<Handle> socketHandles(socketCount);
    if (sockets(&socketCount, socketHandles.data()) != kSuccess) socketCount = 0;
    for (uint32_t s = 0; s < socketCount; ++s) {
      uint32_t count = 0;
      if (processors(socketHandles[s], &count, nullptr) != kSuccess || count == 0 || count > 1024) {
        continue;
      }
      std::vector<Handle> gpus(count);
      if (processors(socketHandles[s], &count, gpus.data()) != kSuccess) continue;
      for (uint32_t g = 0; g < count; ++g) {
        uint64_t word = 0;
        auto info = std::make_unique<AsicInfoBuffer>();
        if (bdf(gpus[g], &word) != kSuccess || asicInfo(gpus[g], info.get()) != kSuccess) continue;
        info->marketName[sizeof(info->marketName) - 1] = '\0';
        char busId[32];
        std::snprintf(busId, sizeof(busId), "%04llx:%02llx:%02llx.%llx",
                      static_cast<unsigned long long>((word >> 16) & 0xffff),
                      static_cast<unsigned long long>((word >> 8) & 0xff),
                      static_cast<unsigned long long>((word >> 3) & 0x1f),
                      static_cast<unsigned long long>(word & 0x7));
        std::string name = info->marketName;
        if (printable(name)) names[busId] = name;
      }
    }
  }
  shutdown();
  ::dlclose(library);
  return names;
}

}  // namespace xccl::topo
