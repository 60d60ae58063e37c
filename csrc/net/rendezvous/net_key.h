// The job's network key: the secret every TCP link's handshake proves knowledge of
// (tcp/wire.h). By default rank 0 draws it for each group and publishes it through the store, so
// the store is the root of trust: whoever can read the store can join. Launchers that distribute
// a secret themselves name a file with XCCL_NET_KEY_FILE instead (docs/network.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "net/rendezvous/bootstrap.h"

namespace xccl::net {

using NetKey = std::array<uint8_t, 32>;

// Fresh random bytes from the kernel (getrandom): nonces, tokens, keys. Throws kSystem if the
// kernel has none to give.
void randomBytes(void* out, size_t bytes);

// Bounds on a key file's length: a short file is a weak secret, a long one is not a key file.
constexpr size_t kMinKeyFileBytes = 32;
constexpr size_t kMaxKeyFileBytes = 64 << 10;

// The key from a file: a regular file owned by this user, readable by nobody else, of
// kMinKeyFileBytes..kMaxKeyFileBytes (its SHA-256 is the key, so any content of that length
// works). kInvalidArgument naming the file and what is wrong.
NetKey readKeyFile(const std::string& path);

// Whether XCCL_NET_KEY_FILE names a key file: then reading the store must not suffice to join a
// group, over any engine (docs/network.md, "What each engine guarantees").
bool keyFileSet();
// XCCL_NET_KEY_FILE's key (readKeyFile), or nothing when it is unset.
std::optional<NetKey> keyFromFile();

// XCCL_NET_KEY_FILE's key when set, else one rank 0 draws and publishes under `key`.
NetKey groupKey(const Bootstrap& bootstrap, const std::string& key);

}  // namespace xccl::net
