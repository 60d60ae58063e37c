// Names of the files xccl creates in /dev/shm: segments, point-to-point rings, windows.
#pragma once

#include <string>

#include "net/store.h"

namespace xccl::net::shm {

// A fresh name "xccl-<kind><pid>-[<tag>-]<64 random bits>" (kind: "" for segments, "p2p-" for
// rings, "w" for windows; tag: the incarnation `store` belongs to, net/incarnation.h): which
// process and which group creation made a leftover is readable from the name, and O_EXCL makes a
// collision an error, never a shared file. Every name starts with kNamePrefix (segment.h).
std::string newFileName(const char* kind, const Store& store);

}  // namespace xccl::net::shm
