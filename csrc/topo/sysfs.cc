#include "topo/sysfs.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <utility>

#include "common/error.h"
#include "common/thread_affinity.h"

namespace xccl::topo {
namespace {

std::string trim(const std::string& text) {
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}

std::string realPath(const std::string& path) {
  char buffer[PATH_MAX];
  if (::realpath(path.c_str(), buffer) == nullptr) return "";
  return buffer;
}

int parseNonNegative(const std::string& text) {
  XCCL_CHECK_ARG(!text.empty() && std::all_of(text.begin(), text.end(), ::isdigit),
                 "bad cpu list element '", text, "'");
  XCCL_CHECK_ARG(text.size() < 8, "cpu number ", text, " is out of range");
  return std::stoi(text);
}

}  // namespace

Sysfs::Sysfs(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  if (root_ == "/") root_.clear();
  devicesReal_ = realPath(resolve("/sys/devices"));
}

std::string Sysfs::resolve(const std::string& path) const { return root_ + path; }

bool Sysfs::exists(const std::string& path) const {
  return ::access(resolve(path).c_str(), F_OK) == 0;
}

std::optional<std::string> Sysfs::readAll(const std::string& path, size_t maxBytes) const {
  std::ifstream in(resolve(path), std::ios::binary);
  if (!in) return std::nullopt;
  // sysfs attributes are a few bytes: read in small chunks rather than reserving maxBytes.
  std::string text;
  char chunk[4096];
  while (text.size() < maxBytes && in) {
    in.read(chunk, static_cast<std::streamsize>(std::min(sizeof(chunk), maxBytes - text.size())));
    text.append(chunk, static_cast<size_t>(in.gcount()));
  }
  // Some sysfs attributes exist but fail on read (e.g. a down link's "speed" gives EINVAL).
  if (in.bad()) return std::nullopt;
  return text;
}

std::optional<std::string> Sysfs::readLine(const std::string& path) const {
  auto text = readAll(path, 64 * 1024);
  if (!text) return std::nullopt;
  size_t newline = text->find('\n');
  return trim(newline == std::string::npos ? *text : text->substr(0, newline));
}

std::optional<int64_t> Sysfs::readInt(const std::string& path) const {
  auto line = readLine(path);
  if (!line || line->empty()) return std::nullopt;
  try {
    size_t used = 0;
    int64_t value = std::stoll(*line, &used, 0);
    if (used != line->size()) return std::nullopt;
    return value;
  } catch (const std::logic_error&) {
    return std::nullopt;
  }
}

std::vector<std::string> Sysfs::list(const std::string& path) const {
  std::vector<std::string> names;
  DIR* dir = ::opendir(resolve(path).c_str());
  if (dir == nullptr) return names;
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

std::string Sysfs::linkBasename(const std::string& path) const {
  char buffer[PATH_MAX];
  ssize_t length = ::readlink(resolve(path).c_str(), buffer, sizeof(buffer) - 1);
  if (length <= 0) return "";
  std::string target(buffer, static_cast<size_t>(length));
  size_t slash = target.find_last_of('/');
  return slash == std::string::npos ? target : target.substr(slash + 1);
}

std::string Sysfs::devicePath(const std::string& path) const {
  if (devicesReal_.empty()) return "";
  std::string real = realPath(resolve(path));
  std::string prefix = devicesReal_ + "/";
  if (real.compare(0, prefix.size(), prefix) != 0) return "";
  return real.substr(prefix.size());
}

std::vector<int> parseCpuList(const std::string& text) {
  std::vector<int> cpus;
  std::string list = trim(text);
  size_t start = 0;
  while (start < list.size()) {
    size_t comma = list.find(',', start);
    std::string item =
        trim(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    start = comma == std::string::npos ? list.size() : comma + 1;
    if (item.empty()) continue;
    size_t dash = item.find('-');
    int first = parseNonNegative(item.substr(0, dash));
    int last = dash == std::string::npos ? first : parseNonNegative(item.substr(dash + 1));
    XCCL_CHECK_ARG(first <= last, "bad cpu range '", item, "'");
    // Bounded before anything is allocated: lists come from files a user names (XCCL_TOPO_FILE).
    XCCL_CHECK_ARG(static_cast<size_t>(last - first) < kMaxCpus - std::min(cpus.size(), kMaxCpus),
                   "cpu list '", trim(text).substr(0, 64), "' names more than ", kMaxCpus, " cpus");
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string formatCpuList(std::vector<int> cpus) {
  return affinity::formatCpuList(std::move(cpus));
}

bool isPciBusId(const std::string& text) {
  // dddd:bb:dd.f
  if (text.size() != 12 || text[4] != ':' || text[7] != ':' || text[10] != '.') return false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == 4 || i == 7 || i == 10) continue;
    char c = text[i];
    if (!std::isdigit(static_cast<unsigned char>(c)) && (c < 'a' || c > 'f')) return false;
  }
  return true;
}

std::string pciBusIdFromDevicePath(const std::string& devicePath) {
  std::string found;
  size_t start = 0;
  while (start <= devicePath.size()) {
    size_t slash = devicePath.find('/', start);
    std::string part =
        devicePath.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (isPciBusId(part)) found = part;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return found;
}

std::string normalizePciBusId(const std::string& busId) {
  std::string id = trim(busId);
  std::transform(id.begin(), id.end(), id.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // NVML spells the domain with 8 digits ("00000000:18:00.0"); sysfs uses 4.
  // A bare "18:00.0" means domain 0.
  if (std::count(id.begin(), id.end(), ':') == 1) return "0000:" + id;
  size_t colon = id.find(':');
  if (colon != std::string::npos && colon > 4) id = id.substr(colon - 4);
  if (colon != std::string::npos && colon < 4) id = std::string(4 - colon, '0') + id;
  return id;
}

}  // namespace xccl::topo
