// What a TCP transport is created with (TcpTransport; its link manager builds the mesh from it).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "net/transport/address.h"

namespace xccl::net::tcp {

struct TcpOptions {
  // Where to listen: `listenAddress` when set (a caller that needs the choice itself, e.g. to
  // pin the progress thread near that NIC, makes it once), else chooseListenAddress(storeHost).
  std::optional<Address> listenAddress;
  std::string storeHost;  // hint for choosing the interface; may be empty
  // Bound for building the mesh, and for how long a peer may stay without any link.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  std::string storePrefix = "tcp";  // keys written under this prefix (unique per group)
  // CPUs for the progress thread, normally those near the NIC or GPU the rank uses
  // (topo::progressCpusFor); empty: the thread is not pinned. XCCL_PIN_PROGRESS=0 ignores it.
  std::vector<int> progressCpus;
  int streams = 0;  // links per peer and interface pair; 0: XCCL_NET_STREAMS
  // NetOptions::ifnames: every name must be an interface with an IPv4 address (else
  // kInvalidArgument at creation). Without `listenAddress`, the rank listens on each one's
  // address and links run over every pair of them it shares with a peer; empty: the listen
  // address and every other up interface a peer shares a subnet with (interfaces.h).
  std::vector<std::string> ifnames;
  // Tests: these local addresses stand for interfaces (named, like `ifnames`; first choice).
  std::vector<Address> localAddresses;
  std::chrono::milliseconds linkTimeout{0};  // 0: XCCL_NET_LINK_TIMEOUT_MS
  uint64_t maxUnexpectedBytes = 0;            // 0: XCCL_NET_MAX_UNEXPECTED_BYTES
};

}  // namespace xccl::net::tcp
