#include "net/net_key.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "common/env.h"
#include "common/sha256.h"

namespace xccl::net {

void randomBytes(void* out, size_t bytes) {
  auto* p = static_cast<uint8_t*>(out);
  while (bytes > 0) {
    const ssize_t n = ::getrandom(p, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) detail::throwSystemError(__FILE__, __LINE__, "getrandom", errno);
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

NetKey readKeyFile(const std::string& path) {
  // O_NOFOLLOW: the checks below are of the file itself, not of whatever a link points to.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  XCCL_CHECK_ARG(fd >= 0, "XCCL_NET_KEY_FILE=", path, ": cannot open it: ", errnoText(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st{};
  XCCL_CHECK_ARG(::fstat(fd, &st) == 0, "XCCL_NET_KEY_FILE=", path, ": ", errnoText(errno));
  XCCL_CHECK_ARG(S_ISREG(st.st_mode), "XCCL_NET_KEY_FILE=", path, " is not a regular file");
  XCCL_CHECK_ARG(st.st_uid == ::geteuid(), "XCCL_NET_KEY_FILE=", path, " is owned by uid ",
                 st.st_uid, ", not by this process's user (uid ", ::geteuid(), ")");
  char mode[8];
  std::snprintf(mode, sizeof(mode), "%03o", static_cast<unsigned>(st.st_mode & 0777));
  XCCL_CHECK_ARG((st.st_mode & 077) == 0, "XCCL_NET_KEY_FILE=", path, " has mode ", mode,
                 ": its group or others may use it; it must be its owner's alone (chmod 600)");
  const auto length = static_cast<uint64_t>(st.st_size);
  XCCL_CHECK_ARG(length >= kMinKeyFileBytes && length <= kMaxKeyFileBytes,
                 "XCCL_NET_KEY_FILE=", path, " holds ", length, " bytes; a key file holds ",
                 kMinKeyFileBytes, " to ", kMaxKeyFileBytes,
                 " bytes (e.g. head -c 32 /dev/urandom)");
  std::vector<uint8_t> bytes(length);
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    XCCL_CHECK_ARG(n > 0, "XCCL_NET_KEY_FILE=", path, ": read ", got, " of ", bytes.size(),
                   " bytes: ", n < 0 ? errnoText(errno) : std::string("it shrank"));
    got += static_cast<size_t>(n);
  }
  const crypto::Digest digest = crypto::sha256(bytes.data(), bytes.size());
  std::memset(bytes.data(), 0, bytes.size());
  return digest;
}

bool keyFileSet() { return !env::getString("XCCL_NET_KEY_FILE").empty(); }

std::optional<NetKey> keyFromFile() {
  const std::string path = env::getString("XCCL_NET_KEY_FILE");
  if (path.empty()) return std::nullopt;
  return readKeyFile(path);
}

NetKey groupKey(const Bootstrap& bootstrap, const std::string& key) {
  const std::string path = env::getString("XCCL_NET_KEY_FILE");
  if (!path.empty()) return readKeyFile(path);
  Bytes drawn;
  if (bootstrap.rank() == 0) {
    drawn.resize(NetKey().size());
    randomBytes(drawn.data(), drawn.size());
  }
  const Bytes shared = bootstrap.broadcast(key, 0, drawn);
  XCCL_CHECK(shared.size() == NetKey().size(), "the group's key in the store holds ", shared.size(),
             " bytes, not ", NetKey().size());
  NetKey out;
  std::memcpy(out.data(), shared.data(), out.size());
  return out;
}

}  // namespace xccl::net
