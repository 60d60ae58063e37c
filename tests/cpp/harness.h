// Shared GoogleTest harness: N ranks as threads over a MemoryStore and real TCP transports.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "net/rendezvous/store.h"
#include "net/transport/tcp/transport.h"
#include "threads.h"

namespace xccl::testing {

inline net::tcp::TcpOptions loopbackOptions(const std::string& prefix = "tcp") {
  net::tcp::TcpOptions options;
  options.storeHost = "127.0.0.1";
  options.timeout = std::chrono::seconds(30);
  options.storePrefix = prefix;
  return options;
}

// Builds `size` TCP transports (one per thread, as ranks), runs body(rank, transport) on each
// rank's thread and rethrows the first failure after all threads joined.
inline void runRanks(int size, const net::tcp::TcpOptions& options,
                     const std::function<void(int, net::Transport&)>& body) {
  net::MemoryStore store;
  runThreads(size, [&](int rank) {
    net::tcp::TcpTransport transport(store, rank, size, options);
    body(rank, transport);
  });
}

inline void runRanks(int size, const std::function<void(int, net::Transport&)>& body) {
  runRanks(size, loopbackOptions(), body);
}

inline net::MessageTag p2pTag(uint64_t tag) { return {net::TagSpace::kPointToPoint, 0, tag}; }
inline net::Deadline soon(int ms = 10000) {
  return net::Clock::now() + std::chrono::milliseconds(ms);
}

}  // namespace xccl::testing
