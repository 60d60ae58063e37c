#include "topo/gpu_sharing.h"

#include <sys/stat.h>

#include <cctype>
#include <sstream>

namespace xccl::topo {

std::string mpsPipeDirectory(const char* pipeDirectoryVariable) {
  if (pipeDirectoryVariable != nullptr && pipeDirectoryVariable[0] != '\0') {
    return pipeDirectoryVariable;
  }
  return "/tmp/nvidia-mps";  // the default of CUDA's MPS documentation
}

bool mpsControlDaemonRunning(const std::string& pipeDirectory) {
  if (pipeDirectory.empty()) return false;
  struct stat st = {};
  if (::stat((pipeDirectory + "/control").c_str(), &st) != 0) return false;
  return S_ISFIFO(st.st_mode);
}

bool isMigUuid(const std::string& uuid) {
  size_t start = 0;
  while (start < uuid.size() && std::isspace(static_cast<unsigned char>(uuid[start]))) ++start;
  return uuid.compare(start, 4, "MIG-") == 0;
}

bool isMigDeviceName(const std::string& name) {
  // " MIG " then a profile "<n>g.<size>gb" (or "<n>c.<n>g.<size>gb" for compute instances).
  const size_t at = name.find(" MIG ");
  if (at == std::string::npos) return false;
  const size_t profile = at + 5;
  return profile < name.size() && std::isdigit(static_cast<unsigned char>(name[profile])) &&
         name.find('g', profile) != std::string::npos;
}

bool visibleDevicesAreMig(const char* visibleDevices) {
  if (visibleDevices == nullptr) return false;
  std::istringstream entries(visibleDevices);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    if (isMigUuid(entry)) return true;
  }
  return false;
}

}  // namespace xccl::topo
