#include "topo/fake_sysfs.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace xccl::topo::testing {
namespace fs = std::filesystem;

namespace {

std::string hex(unsigned value, int digits) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "0x%0*x", digits, value);
  return buffer;
}

std::string baseName(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

}  // namespace

FakeSysfs::FakeSysfs() {
  std::string pattern = (fs::temp_directory_path() / "xccl-fake-sysfs-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  root_ = pattern;
  mkdir("/sys/devices");
}

FakeSysfs::~FakeSysfs() {
  std::error_code ignored;
  fs::remove_all(root_, ignored);
}

void FakeSysfs::mkdir(const std::string& path) { fs::create_directories(root_ + path); }

void FakeSysfs::write(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(root_ + path).parent_path());
  std::ofstream out(root_ + path, std::ios::trunc);
  out << content;
  if (!out) throw std::runtime_error("cannot write " + root_ + path);
}

void FakeSysfs::symlink(const std::string& path, const std::string& target) {
  fs::create_directories(fs::path(root_ + path).parent_path());
  fs::create_symlink(root_ + target, root_ + path);
}

void FakeSysfs::setCpus(const std::string& online, const std::string& model, bool hypervisor) {
  write("/sys/devices/system/cpu/online", online + "\n");
  std::string flags = "fpu vme de pse tsc msr sse sse2";
  if (hypervisor) flags += " hypervisor";
  flags += " avx2";
  write("/proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: " + model +
                             "\nflags\t\t: " + flags + "\n\nprocessor\t: 1\n");
}

void FakeSysfs::addNumaNode(int id, const std::string& cpus, const std::string& distances) {
  std::string dir = "/sys/devices/system/node/node" + std::to_string(id);
  write(dir + "/cpulist", cpus + "\n");
  write(dir + "/distance", distances + "\n");
  write(dir + "/meminfo", "Node " + std::to_string(id) + " MemTotal:       1048576 kB\n");
}

void FakeSysfs::setTwoNodeCpus(int cpuCount, const std::string& model, int remote) {
  const std::string last = std::to_string(cpuCount - 1);
  const std::string far = std::to_string(remote);
  setCpus("0-" + last, model, /*hypervisor=*/false);
  addNumaNode(0, "0-" + std::to_string(cpuCount / 2 - 1), "10 " + far);
  addNumaNode(1, std::to_string(cpuCount / 2) + "-" + last, far + " 10");
}

void FakeSysfs::addPci(const std::string& path, unsigned vendor, unsigned device,
                       unsigned classCode, int numa, const std::string& cpus) {
  std::string dir = "/sys/devices/" + path;
  write(dir + "/vendor", hex(vendor, 4) + "\n");
  write(dir + "/device", hex(device, 4) + "\n");
  write(dir + "/class", hex(classCode, 6) + "\n");
  write(dir + "/numa_node", std::to_string(numa) + "\n");
  write(dir + "/local_cpulist", cpus + "\n");
  symlink("/sys/bus/pci/devices/" + baseName(path), dir);
}

void FakeSysfs::addNetdev(const std::string& name, const std::string& devicePath, int type,
                          const std::string& operstate, int speed, int mtu, unsigned flags,
                          const std::string& driver) {
  std::string dir = devicePath.empty() ? "/sys/devices/virtual/net/" + name
                                       : "/sys/devices/" + devicePath + "/net/" + name;
  write(dir + "/type", std::to_string(type) + "\n");
  write(dir + "/operstate", operstate + "\n");
  // The kernel fails the read (EINVAL) for a down link; an absent file is the closest fake.
  if (speed != 0) write(dir + "/speed", std::to_string(speed) + "\n");
  write(dir + "/mtu", std::to_string(mtu) + "\n");
  write(dir + "/flags", hex(flags, 4) + "\n");
  write(dir + "/carrier", operstate == "up" ? "1\n" : "0\n");
  if (!devicePath.empty()) {
    symlink(dir + "/device", "/sys/devices/" + devicePath);
    if (!driver.empty() && !fs::exists(root_ + "/sys/devices/" + devicePath + "/driver")) {
      mkdir("/sys/bus/drivers/" + driver);
      symlink("/sys/devices/" + devicePath + "/driver", "/sys/bus/drivers/" + driver);
    }
  }
  symlink("/sys/class/net/" + name, dir);
}

void FakeSysfs::addRdmaPort(const std::string& hca, const std::string& pciPath, int port,
                            const std::string& state, const std::string& linkLayer,
                            const std::string& rate, const std::string& netdev,
                            const std::string& driver) {
  std::string dir = "/sys/devices/" + pciPath + "/infiniband/" + hca;
  std::string portDir = dir + "/ports/" + std::to_string(port);
  write(portDir + "/state", state + "\n");
  write(portDir + "/link_layer", linkLayer + "\n");
  write(portDir + "/rate", rate + "\n");
  if (linkLayer == "Ethernet" && !netdev.empty()) {
    write(portDir + "/gid_attrs/ndevs/0", netdev + "\n");
  }
  if (!fs::exists(root_ + dir + "/device")) symlink(dir + "/device", "/sys/devices/" + pciPath);
  if (!fs::exists(root_ + "/sys/class/infiniband/" + hca)) {
    symlink("/sys/class/infiniband/" + hca, dir);
  }
  if (!netdev.empty())
    addNetdev(netdev, pciPath, linkLayer == "InfiniBand" ? 32 : 1, "up", 0, 4092, 0x1003, driver);
  if (!driver.empty() && !fs::exists(root_ + "/sys/devices/" + pciPath + "/driver")) {
    mkdir("/sys/bus/drivers/" + driver);
    symlink("/sys/devices/" + pciPath + "/driver", "/sys/bus/drivers/" + driver);
  }
}

void FakeSysfs::addKfdNode(int node, const std::map<std::string, long long>& properties,
                           const std::vector<std::map<std::string, long long>>& links,
                           long long memoryBytes) {
  std::string dir = "/sys/class/kfd/kfd/topology/nodes/" + std::to_string(node);
  auto format = [](const std::map<std::string, long long>& values) {
    std::string text;
    for (const auto& [key, value] : values) text += key + " " + std::to_string(value) + "\n";
    return text;
  };
  write(dir + "/properties", format(properties));
  mkdir(dir + "/io_links");
  for (size_t i = 0; i < links.size(); ++i) {
    write(dir + "/io_links/" + std::to_string(i) + "/properties", format(links[i]));
  }
  if (memoryBytes > 0) {
    write(dir + "/mem_banks/0/properties",
          "heap_type 1\nsize_in_bytes " + std::to_string(memoryBytes) + "\n");
  }
}

}  // namespace xccl::topo::testing
