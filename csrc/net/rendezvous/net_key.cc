#include "net/rendezvous/net_key.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "common/env.h"
#include "common/error.h"
#include "common/files.h"
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
  // files::readRegularFile: never through a link (the checks below are of the file itself),
  // never blocked by a FIFO; the owner, mode and length are checked before a byte is read.
  const std::string what = "XCCL_NET_KEY_FILE=" + path;
  std::string bytes =
      files::readRegularFile(path, kMaxKeyFileBytes, what, [&](const struct stat& st) {
        XCCL_CHECK_ARG(st.st_uid == ::geteuid(), what, " is owned by uid ", st.st_uid,
                       ", not by this process's user (uid ", ::geteuid(), ")");
        char mode[8];
        std::snprintf(mode, sizeof(mode), "%03o", static_cast<unsigned>(st.st_mode & 0777));
        XCCL_CHECK_ARG(
            (st.st_mode & 077) == 0, what, " has mode ", mode,
            ": its group or others may use it; it must be its owner's alone (chmod 600)");
        const auto length = static_cast<uint64_t>(st.st_size);
        XCCL_CHECK_ARG(length >= kMinKeyFileBytes && length <= kMaxKeyFileBytes, what, " holds ",
                       length, " bytes; a key file holds ", kMinKeyFileBytes, " to ",
                       kMaxKeyFileBytes, " bytes (e.g. head -c 32 /dev/urandom)");
      });
  // Checked again on what was read: the file may have changed since its fstat.
  const size_t length = bytes.size();
  const crypto::Digest digest = crypto::sha256(bytes.data(), length);
  std::memset(bytes.data(), 0, length);
  XCCL_CHECK_ARG(length >= kMinKeyFileBytes, what, " holds ", length, " bytes; a key file holds ",
                 kMinKeyFileBytes, " to ", kMaxKeyFileBytes,
                 " bytes (e.g. head -c 32 /dev/urandom)");
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
