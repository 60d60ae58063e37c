// What building a group's transports needs, the same for every engine: its own header so an
// engine (net/transport/tcp, net/transport/ofi) sees these options without the factory that chooses
// among engines.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace xccl::net {

struct NetOptions {
  std::string storeHost;  // hint for choosing the interface; may be empty
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // bound for connecting
  std::string storePrefix = "net";  // store keys written under this prefix (unique per group)
  // CPUs for progress threads, normally those near the NIC the rank uses; empty: unpinned.
  std::vector<int> progressCpus;
  // XCCL_NET_IFNAMES, split at commas; empty: every usable interface (net/transport/tcp chooses).
  std::vector<std::string> ifnames;
};

}  // namespace xccl::net
