// Ranks as threads over the libfabric transport (tcp;ofi_rxm on loopback), like harness.h does
// for TCP.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "net/rendezvous/store.h"
#include "net/transport/ofi/transport.h"
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

// Each rank with the key keyOf(rank) as XCCL_NET_KEY_FILE's (nothing: no key file). Returns what
// each rank's creation threw ("" where it built the group and ran `body`).
inline std::vector<std::string> runKeyedOfiRanks(
    net::Store& store, int size, const std::function<std::optional<net::NetKey>(int)>& keyOf,
    const std::function<void(int, net::ofi::OfiTransport&)>& body) {
  const net::NetOptions options = ofiLoopbackOptions();
  std::vector<std::string> errors(size);
  runThreads(size, [&](int rank) {
    std::unique_ptr<net::ofi::OfiTransport> transport;
    try {
      transport = std::make_unique<net::ofi::OfiTransport>(store, rank, size, options,
                                                           kLoopbackProvider, keyOf(rank));
    } catch (const Error& e) {
      errors[rank] = e.what();
      return;
    }
    body(rank, *transport);
  });
  return errors;
}

// A key as readKeyFile makes one (tests hand it to the ranks directly: they share a process).
inline net::NetKey testKey(uint8_t fill) {
  net::NetKey key;
  key.fill(fill);
  return key;
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
