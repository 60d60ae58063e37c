// Which machine this process runs on, as the ranks of a group compare it: ranks with equal
// identities share a kernel, hence /dev/shm and CUDA IPC (net/transport/hierarchy.h,
// net/regions/shm/segment.h).
#pragma once

#include <string>

namespace xccl::topo {

// "<hostname> <boot id>": equal on two ranks exactly when they run on the same booted machine
// (or in containers sharing its kernel, which is what decides whether /dev/shm can be shared;
// containers with private /dev/shm mounts are caught later when the peers cannot open the name).
std::string hostIdentity();

}  // namespace xccl::topo
