// Shared-memory files whose names a peer published through the store (segments, rings, window
// files). The store is the root of trust, but /dev/shm is writable by everyone on the host: a
// name is checked before it is opened, and the opened file before anything of it is mapped, so a
// stale, foreign or planted file is a clear error instead of memory shared with a stranger.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace xccl::net::shm {

// Every name xccl makes is "<prefix><pid>-[<tag>-]<16 hex digits>" (names.h newFileName); the
// longest prefix is "xccl-p2p-".
constexpr size_t kMaxFileNameBytes = 64;

// "" when `name` has exactly the form xccl gives its files under `prefix`, else why. Pure (no
// system calls): what it accepts cannot leave /dev/shm ('/', "..", NUL and spaces never pass).
std::string checkFileName(std::string_view name, std::string_view prefix);

// "" when the open file `fd` (named `name` in messages) may be mapped as `bytes` bytes: a regular
// file owned by this process's user, with no permission for group or others, exactly `bytes`
// long. Else why, naming the file and what is wrong.
std::string checkOpenedFile(int fd, const std::string& name, uint64_t bytes);

// Opens the peer's file `name` read-write after checkFileName(name, prefix), then
// checkOpenedFile(bytes). The descriptor, or -1 with *why (nothing is left open).
int openPeerFile(const std::string& name, std::string_view prefix, uint64_t bytes,
                 std::string* why);

}  // namespace xccl::net::shm
