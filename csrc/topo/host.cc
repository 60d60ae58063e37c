#include "topo/host.h"

#include <unistd.h>

#include <fstream>

namespace xccl::topo {

std::string hostIdentity() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string bootId;
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::getline(file, bootId);
  return std::string(host) + " " + bootId;
}

}  // namespace xccl::topo
