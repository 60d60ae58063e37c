#include "net/transport/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <unistd.h>

#include <charconv>
#include <cstring>

#include "common/env.h"
#include "common/logging.h"

namespace xccl::net {
namespace {

bool isLoopback(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr) >> 24) == 127;
  }
  if (sa->sa_family == AF_INET6) {
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
  }
  return false;
}

Address loopback() {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return Address::from(reinterpret_cast<sockaddr*>(&in), sizeof(in));
}

bool interfaceAddress(const std::string& ifname, Address* out) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* it = list; it != nullptr && !found; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || ifname != it->ifa_name) continue;
    if (it->ifa_addr->sa_family == AF_INET) {
      *out = Address::from(it->ifa_addr, sizeof(sockaddr_in));
      found = true;
    }
  }
  ::freeifaddrs(list);
  return found;
}

// The source address the kernel would use to reach `host`: a UDP connect sends nothing.
bool routeSourceTo(const std::string& host, Address* out) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* result = nullptr;
  if (host.empty() || ::getaddrinfo(host.c_str(), "9", &hints, &result) != 0) return false;
  bool ok = false;
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, result->ai_addr, result->ai_addrlen) == 0) {
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      *out = Address::from(reinterpret_cast<sockaddr*>(&local), len);
      ok = true;
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(result);
  return ok;
}

bool hostnameAddress(Address* out) {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return false;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (::getaddrinfo(name, nullptr, &hints, &result) != 0) return false;
  bool ok = false;
  for (addrinfo* it = result; it != nullptr; it = it->ai_next) {
    if (!isLoopback(it->ai_addr)) {
      *out = Address::from(it->ai_addr, it->ai_addrlen);
      ok = true;
      break;
    }
  }
  ::freeaddrinfo(result);
  return ok;
}

}  // namespace

Address Address::from(const sockaddr* sa, socklen_t length) {
  Address a;
  std::memcpy(&a.storage, sa, length);
  a.length = length;
  return a;
}

std::string Address::toString() const {
  char host[INET6_ADDRSTRLEN] = {};
  const auto* sa = reinterpret_cast<const sockaddr*>(&storage);
  std::ostringstream out;
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    out << "[" << host << "]:" << ntohs(in6->sin6_port);
  } else {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    out << host << ":" << ntohs(in->sin_port);
  }
  return out.str();
}

Address Address::parse(const std::string& text) {
  size_t colon = text.rfind(':');
  XCCL_CHECK_ARG(colon != std::string::npos, "bad address '", text, "'");
  std::string host = text.substr(0, colon);
  // Strict decimal 0-65535 (0: any port, for a listener): addresses come from peers through the
  // store, and stoi would throw std::exceptions, take "80x" as 80 and wrap 65536 to 0.
  uint16_t port = 0;
  const char* digits = text.data() + colon + 1;
  const auto [end, error] = std::from_chars(digits, text.data() + text.size(), port);
  XCCL_CHECK_ARG(error == std::errc() && end == text.data() + text.size() && end > digits,
                 "bad port in address '", text, "' (expected 0 to 65535)");
  if (!host.empty() && host.front() == '[') {
    XCCL_CHECK_ARG(host.size() >= 2 && host.back() == ']', "bad address '", text, "'");
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
    XCCL_CHECK_ARG(::inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &in6.sin6_addr) ==
                       1,
                   "bad address '", text, "'");
    return Address::from(reinterpret_cast<sockaddr*>(&in6), sizeof(in6));
  }
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  XCCL_CHECK_ARG(::inet_pton(AF_INET, host.c_str(), &in.sin_addr) == 1, "bad address '", text, "'");
  return Address::from(reinterpret_cast<sockaddr*>(&in), sizeof(in));
}

std::vector<Address> interfaceAddresses(const std::vector<std::string>& names) {
  std::vector<Address> out;
  for (const std::string& name : names) {
    Address a;
    if (interfaceAddress(name, &a)) {
      out.push_back(a);
      continue;
    }
    // Name what exists, so a typo or a host with other interface names is fixed at once.
    std::string existing;
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) == 0) {
      for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
        if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
        existing += (existing.empty() ? "" : ", ") + std::string(it->ifa_name);
      }
      ::freeifaddrs(list);
    }
    XCCL_THROW(ErrorKind::kInvalidArgument, "XCCL_NET_IFNAMES names '", name,
               "', which is no interface with an IPv4 address here; those with one: ",
               existing.empty() ? "none" : existing);
  }
  return out;
}

std::string socketIfname() {
  const std::string ifnames = env::getString("XCCL_SOCKET_IFNAME");
  if (ifnames.empty()) return "";
  std::istringstream list(ifnames);
  std::string name;
  Address a;
  while (std::getline(list, name, ',')) {
    if (interfaceAddress(name, &a)) return name;
  }
  XCCL_THROW(ErrorKind::kInvalidArgument, "XCCL_SOCKET_IFNAME=", ifnames,
             ": no such interface with an IPv4 address");
}

Address chooseListenAddress(const std::string& storeHost) {
  Address a;
  if (const std::string name = socketIfname(); !name.empty()) {
    interfaceAddress(name, &a);
    return a;
  }
  if (routeSourceTo(storeHost, &a)) return a;
  if (hostnameAddress(&a)) return a;
  XCCL_INFO("tcp", "no routable address found; listening on loopback");
  return loopback();
}

}  // namespace xccl::net
