// Ranks as threads over ShmTransport (every rank one host), for the shm and routed tests.
#pragma once

#include <numeric>

#include "harness.h"
#include "net/transport/shm_rings/transport.h"

namespace xccl::testing {

// As a net::Transport: the interface's default arguments apply.
inline std::unique_ptr<net::Transport> makeShm(net::Store& store, int rank, int size,
                                               std::vector<int> members = {},
                                               const std::string& prefix = "shm-p2p") {
  if (members.empty()) {
    members.resize(size);
    std::iota(members.begin(), members.end(), 0);
  }
  net::shm_rings::TransportOptions options;
  options.timeout = std::chrono::seconds(30);
  options.storePrefix = prefix;
  std::string why;
  auto t = net::shm_rings::ShmTransport::create(store, rank, size, members, options, &why);
  if (!t) XCCL_THROW(ErrorKind::kInternal, "shared memory unavailable: ", why);
  return t;
}

inline void runShmRanks(int size, const std::function<void(int, net::Transport&)>& body) {
  net::MemoryStore store;
  runThreads(size, [&](int rank) {
    auto transport = makeShm(store, rank, size);
    body(rank, *transport);
  });
}

}  // namespace xccl::testing
