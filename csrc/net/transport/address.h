// Addresses of this host: the IPv4/IPv6 address type every engine speaks of, and the one choice
// of the address a rank is reached at (XCCL_SOCKET_IFNAME, else the route to the store's host).
// Net level, not an engine's: net/transport/tcp listens there, net/transport/ofi picks the NIC that
// has it, the backend pins progress threads near it.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <string>
#include <vector>

namespace xccl::net {

struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;
  std::string toString() const;  // "ip:port" / "[ip6]:port"
  static Address parse(const std::string& text);  // inverse of toString
  static Address from(const sockaddr* sa, socklen_t length);
};

// The IPv4 address of each named interface, in order; kInvalidArgument naming the first name
// that has none and the interfaces that do.
std::vector<Address> interfaceAddresses(const std::vector<std::string>& names);

// XCCL_SOCKET_IFNAME's first interface that has an IPv4 address (the list names alternatives,
// for hosts whose interfaces are named differently); "" when unset; kInvalidArgument when it
// names none that exists.
std::string socketIfname();

// The address this rank listens on: XCCL_SOCKET_IFNAME's interface if set, else the local
// address that routes to `storeHost` (no packet is sent), else the hostname's address, else
// loopback.
Address chooseListenAddress(const std::string& storeHost);

}  // namespace xccl::net
