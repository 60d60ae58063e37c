// The interfaces one rank's TCP links run over, what it publishes about them through the store,
// and how two ranks pair theirs up: link i to a peer runs over pair i / XCCL_NET_STREAMS.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "net/transport/tcp/socket.h"

namespace xccl::net::tcp {

struct Interface {
  std::string name;  // "xnet1"; the interface whose subnet holds the address, "?" if none
  Address address;   // where this rank listens on it (a port once bound)
  uint32_t network = 0, mask = 0;  // IPv4 subnet, host byte order; 0/0 when unknown (IPv6)
};

bool isLoopback(const Address& address);

// Describes `address` by the local interface that holds it (or whose subnet does).
Interface describeAddress(const Address& address);

// Every other up, non-loopback IPv4 interface, on a subnet none of `have` is on.
std::vector<Interface> otherInterfaces(const std::vector<Interface>& have);

// "E|name=ip:port/network/mask,..." (E: the list was named, A: discovered) and back. The parser
// reads what peers publish through the store and throws kInternal for anything publish would
// not write (at most kMaxInterfaces entries, ports 1-65535, network within its mask).
constexpr size_t kMaxInterfaces = 1024;
std::string publishInterfaces(const std::vector<Interface>& interfaces, bool named);
std::vector<Interface> parseInterfaces(const std::string& text, bool* named);

// Pairs of (dialer's interface, acceptor's interface), computed alike on both ends. Named lists
// (both ends named theirs): one-to-one by subnet, else by position. Discovered lists: the first
// interfaces (each end's own choice) always, then the others by subnet; an address that is on
// both ends counts only between ranks of one host (equal first addresses), so a private bridge
// that every host numbers alike (docker0) is never dialled across hosts. Never empty.
std::vector<std::pair<int, int>> pairInterfaces(const std::vector<Interface>& dialer,
                                                const std::vector<Interface>& acceptor, bool named);

}  // namespace xccl::net::tcp
