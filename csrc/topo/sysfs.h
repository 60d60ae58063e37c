// Reads the kernel's sysfs/procfs files below a root folder.
//
// Discovery reads every path through a Sysfs so that tests can point it at a fake tree built in a
// temporary folder ("<root>/sys/...", "<root>/proc/...", "<root>/dev/...") and the real probe uses
// root "/". Every read is non-throwing: a file that is missing or unreadable is a normal outcome
// (containers hide parts of /sys, VMs lack NUMA information), so callers get an empty value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace xccl::topo {

class Sysfs {
 public:
  explicit Sysfs(std::string root);

  const std::string& root() const { return root_; }
  // `path` is absolute as seen on a real machine ("/sys/bus/pci/devices").
  std::string resolve(const std::string& path) const;

  bool exists(const std::string& path) const;
  // The first line without its trailing newline and surrounding blanks; nullopt when unreadable.
  std::optional<std::string> readLine(const std::string& path) const;
  // The whole file; nullopt when unreadable. Capped so a stray huge file cannot stall discovery.
  std::optional<std::string> readAll(const std::string& path, size_t maxBytes = 1 << 20) const;
  // Decimal or 0x-prefixed hexadecimal integer on the first line.
  std::optional<int64_t> readInt(const std::string& path) const;
  // Entry names of a folder, sorted, without "." and ".."; empty when the folder is missing.
  std::vector<std::string> list(const std::string& path) const;
  // The target of a symbolic link's last component (basename); "" when not a link.
  std::string linkBasename(const std::string& path) const;
  // realpath() of `path` relative to "<root>/sys/devices", e.g.
  // "pci0000:15/0000:15:01.0/0000:18:00.0"; "" when it does not resolve below that folder.
  std::string devicePath(const std::string& path) const;

 private:
  std::string root_;
  std::string devicesReal_;  // realpath of <root>/sys/devices, computed once
};

// Most CPUs one list may name, counting repeats: the kernel's NR_CPUS stops at 8192.
constexpr size_t kMaxCpus = 65536;
// Parses the kernel's cpulist syntax ("0-3,8,10-11"); throws kInvalidArgument on bad text or
// more than kMaxCpus CPUs.
std::vector<int> parseCpuList(const std::string& text);
// The inverse: sorted, de-duplicated ranges ("0-3,8,10-11"); "" for an empty list.
std::string formatCpuList(std::vector<int> cpus);

// The last component of a device path that looks like a PCI address ("0000:18:00.0"); "" if none.
// Network devices hang below their PCI function (".../0000:00:03.0/virtio2/net/eth0").
std::string pciBusIdFromDevicePath(const std::string& devicePath);
// True for "dddd:bb:dd.f" in lower-case hexadecimal.
bool isPciBusId(const std::string& text);
// Lower-case "0000:18:00.0" from NVML's "00000000:18:00.0" and similar spellings.
std::string normalizePciBusId(const std::string& busId);

}  // namespace xccl::topo
