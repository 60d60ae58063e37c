// Builds fake sysfs/procfs trees in a temporary folder, shaped like the kernel's, so discovery
// can be tested for machines this host is not (GPUs, NUMA, InfiniBand, KFD).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace xccl::topo::testing {

class FakeSysfs {
 public:
  FakeSysfs();  // creates the folder
  ~FakeSysfs();  // removes it
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  const std::string& root() const { return root_; }

  // Paths are absolute as on a real machine ("/sys/..."); parents are created.
  void write(const std::string& path, const std::string& content);
  void mkdir(const std::string& path);
  // A symbolic link at `path` pointing at `target` (both machine-absolute).
  void symlink(const std::string& path, const std::string& target);

  void setCpus(const std::string& online, const std::string& model, bool hypervisor);
  void addNumaNode(int id, const std::string& cpus, const std::string& distances);
  // A bare-metal host of `cpuCount` CPUs in two NUMA nodes, node 0 the lower half, `remote` the
  // distance between them (10 being local).
  void setTwoNodeCpus(int cpuCount, const std::string& model, int remote);

  // A PCI function at /sys/devices/<path> (its last component is the bus id), linked from
  // /sys/bus/pci/devices. numa -1 and cpus "" mimic a VM.
  void addPci(const std::string& path, unsigned vendor, unsigned device, unsigned classCode,
              int numa, const std::string& cpus);

  // A netdev; `devicePath` "" makes it virtual (/sys/devices/virtual/net/<name>).
  void addNetdev(const std::string& name, const std::string& devicePath, int type,
                 const std::string& operstate, int speed, int mtu, unsigned flags,
                 const std::string& driver);

  // An RDMA device with one port; `netdev` is attached under its PCI function.
  void addRdmaPort(const std::string& hca, const std::string& pciPath, int port,
                   const std::string& state, const std::string& linkLayer, const std::string& rate,
                   const std::string& netdev, const std::string& driver);

  // A KFD node; `properties` become its properties file, `links` its io_links.
  void addKfdNode(int node, const std::map<std::string, long long>& properties,
                  const std::vector<std::map<std::string, long long>>& links,
                  long long memoryBytes = 0);

 private:
  std::string root_;
};

}  // namespace xccl::topo::testing
