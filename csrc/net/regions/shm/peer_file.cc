#include "net/regions/shm/peer_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "common/error.h"

namespace xccl::net::shm {
namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isHex(char c) { return isDigit(c) || (c >= 'a' && c <= 'f'); }

// Names go into messages; a hostile one must not flood or garble the log.
std::string printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, kMaxFileNameBytes)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (text.size() > kMaxFileNameBytes) out += "...";
  return out;
}

}  // namespace

std::string checkFileName(std::string_view name, std::string_view prefix) {
  const auto bad = [&](const char* what) {
    return detail::concat("shared-memory name '", printable(name), "' ", what);
  };
  if (name.size() > kMaxFileNameBytes) return bad("is too long");
  if (name.substr(0, prefix.size()) != prefix) {
    return bad(detail::concat("does not start with '", prefix, "'").c_str());
  }
  std::string_view rest = name.substr(prefix.size());
  size_t digits = 0;
  while (digits < rest.size() && isDigit(rest[digits])) ++digits;
  const auto allHex = [](std::string_view text) {
    for (char c : text) {
      if (!isHex(c)) return false;
    }
    return !text.empty();
  };
  // A pid (at most 10 digits), a dash, the incarnation's tag (1-16 hex digits) and a dash where
  // the store carries one (names.h newFileName), then the 64-bit token in lowercase hex.
  const char* form = "is not of the form <prefix><pid>-[<tag>-]<16 hex digits>";
  if (digits == 0 || digits > 10 || digits + 1 + 16 > rest.size() || rest[digits] != '-') {
    return bad(form);
  }
  const std::string_view token = rest.substr(rest.size() - 16);
  std::string_view tag = rest.substr(digits + 1, rest.size() - 16 - digits - 1);
  if (!tag.empty()) {
    if (tag.back() != '-' || tag.size() > 17) return bad(form);
    tag.remove_suffix(1);
    if (!allHex(tag)) return bad(form);
  }
  if (!allHex(token)) return bad(form);
  return "";
}

std::string checkOpenedFile(int fd, const std::string& name, uint64_t bytes) {
  struct stat st{};
  if (::fstat(fd, &st) != 0)
    return detail::concat("fstat of ", name, " failed: ", errnoText(errno));
  if (!S_ISREG(st.st_mode)) return detail::concat(name, " is not a regular file");
  if (st.st_uid != ::geteuid()) {
    return detail::concat(name, " belongs to uid ", st.st_uid, ", not to this process's uid ",
                          ::geteuid(), "; refusing to map it");
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return detail::concat(name, " has mode ", mode,
                          " (group or others may use it; xccl makes its files 0600); refusing to "
                          "map it");
  }
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) != bytes) {
    return detail::concat(name, " has ", st.st_size, " bytes, expected exactly ", bytes,
                          "; refusing to map it");
  }
  return "";
}

int openPeerFile(const std::string& name, std::string_view prefix, uint64_t bytes,
                 std::string* why) {
  *why = checkFileName(name, prefix);
  if (!why->empty()) return -1;
  const int fd = ::shm_open(("/" + name).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
  if (fd < 0) {
    *why = detail::concat("shm_open(", name, ") failed: ", errnoText(errno));
    return -1;
  }
  *why = checkOpenedFile(fd, name, bytes);
  if (!why->empty()) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace xccl::net::shm
