// Ranks as threads over the libfabric transport (tcp;ofi_rxm on loopback), like harness.h does
// for TCP.
#pragma once

#include <functional>

#include "net/ofi/transport.h"
#include "net/store.h"
#include "threads.h"

namespace xccl::testing {

inline net::NetOptions ofiLoopbackOptions(const std::string& prefix = "ofi") {
  net::NetOptions options;
  options.storeHost = "127.0.0.1";
  options.timeout = std::chrono::seconds(30);
  options.storePrefix = prefix;
  return options;
}

// tcp;ofi_rxm is the provider every test machine has.
constexpr const char* kLoopbackProvider = "tcp;ofi_rxm";

// The store is the caller's where a test reads what the ranks published (their endpoint names).
inline void runOfiRanks(net::Store& store, int size,
                        const std::function<void(int, net::ofi::OfiTransport&)>& body) {
  const net::NetOptions options = ofiLoopbackOptions();
  runThreads(size, [&](int rank) {
    net::ofi::OfiTransport transport(store, rank, size, options, kLoopbackProvider);
    body(rank, transport);
  });
}

inline void runOfiRanks(int size, const std::function<void(int, net::ofi::OfiTransport&)>& body) {
  net::MemoryStore store;
  runOfiRanks(store, size, body);
}

}  // namespace xccl::testing
