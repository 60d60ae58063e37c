// Ranks as threads over the libfabric transport (tcp;ofi_rxm on loopback), like harness.h does
// for TCP.
#pragma once

#include <functional>
#include <string>

#include "common/error.h"
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

// Point-to-point tags, deadlines and the error a request ends with, as the ofi tests use them
// (the ofi engine over tcp;ofi_rxm is slower to start than xccl's TCP: 20 s by default).
inline net::MessageTag ofiP2p(uint64_t tag) { return {net::TagSpace::kPointToPoint, 0, tag}; }
inline net::Deadline ofiSoon(int ms = 20000) {
  return net::Clock::now() + std::chrono::milliseconds(ms);
}
// What waiting for `r` on `t` throws, or "" when it completes.
inline std::string errorOf(net::Transport& t, const net::RequestPtr& r, int ms = 20000) {
  try {
    t.wait({r}, ofiSoon(ms), "op");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace xccl::testing
