#include "net/transport/tcp/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include <charconv>
#include <cstring>
#include <sstream>

#include "common/logging.h"

namespace xccl::net::tcp {
namespace {

uint32_t ipv4(const sockaddr* sa) {
  return ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr);
}

bool isIpv4(const Address& a) {
  return reinterpret_cast<const sockaddr*>(&a.storage)->sa_family == AF_INET;
}

uint32_t ipv4(const Address& a) { return ipv4(reinterpret_cast<const sockaddr*>(&a.storage)); }

bool sameSubnet(const Interface& a, const Interface& b) {
  return a.mask != 0 && a.mask == b.mask && a.network == b.network;
}

uint16_t port(const Address& a) {
  const auto* sa = reinterpret_cast<const sockaddr*>(&a.storage);
  return ntohs(sa->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port
                                         : reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
}

std::string host(const Address& a) {
  const std::string text = a.toString();
  return text.substr(0, text.rfind(':'));
}

}  // namespace

bool isLoopback(const Address& address) { return isIpv4(address) && (ipv4(address) >> 24) == 127; }

Interface describeAddress(const Address& address) {
  Interface out{"?", address, 0, 0};
  if (!isIpv4(address)) return out;
  const uint32_t ip = ipv4(address);
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  bool exact = false;
  for (ifaddrs* it = list; it != nullptr && !exact; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_netmask == nullptr ||
        it->ifa_addr->sa_family != AF_INET) {
      continue;
    }
    const uint32_t mask = ipv4(it->ifa_netmask);
    if ((ipv4(it->ifa_addr) & mask) != (ip & mask)) continue;
    exact = ipv4(it->ifa_addr) == ip;  // an exact address wins over a subnet that holds it
    if (exact || out.mask == 0) {
      out.name = it->ifa_name;
      out.mask = mask;
      out.network = ip & mask;
    }
  }
  ::freeifaddrs(list);
  return out;
}

std::vector<Interface> otherInterfaces(const std::vector<Interface>& have) {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_netmask == nullptr ||
        it->ifa_addr->sa_family != AF_INET || !(it->ifa_flags & IFF_UP) ||
        (it->ifa_flags & IFF_LOOPBACK)) {
      continue;
    }
    Interface candidate;
    candidate.name = it->ifa_name;
    candidate.address.length = sizeof(sockaddr_in);
    std::memcpy(&candidate.address.storage, it->ifa_addr, sizeof(sockaddr_in));
    candidate.mask = ipv4(it->ifa_netmask);
    candidate.network = ipv4(it->ifa_addr) & candidate.mask;
    auto known = [&](const std::vector<Interface>& in) {
      for (const Interface& i : in) {
        if (sameSubnet(i, candidate)) return true;
      }
      return false;
    };
    if (!known(have) && !known(out)) out.push_back(candidate);
  }
  ::freeifaddrs(list);
  return out;
}

std::string publishInterfaces(const std::vector<Interface>& interfaces, bool named) {
  std::ostringstream out;
  out << (named ? "E|" : "A|");
  for (size_t i = 0; i < interfaces.size(); ++i) {
    const Interface& it = interfaces[i];
    out << (i ? "," : "") << it.name << "=" << it.address.toString() << "/" << it.network << "/"
        << it.mask;
  }
  return out.str();
}

std::vector<Interface> parseInterfaces(const std::string& text, bool* named) {
  XCCL_CHECK(text.size() > 2 && (text[0] == 'E' || text[0] == 'A') && text[1] == '|',
             "bad interface list '", text, "' in the store");
  *named = text[0] == 'E';
  std::vector<Interface> out;
  std::istringstream list(text.substr(2));
  std::string entry;
  while (std::getline(list, entry, ',')) {
    XCCL_CHECK(out.size() < kMaxInterfaces, "interface list '", text,
               "' in the store has more than ", kMaxInterfaces, " entries");
    const size_t eq = entry.find('=');
    const size_t mask = entry.rfind('/');
    const size_t network = mask == std::string::npos ? mask : entry.rfind('/', mask - 1);
    XCCL_CHECK(eq != std::string::npos && eq > 0 && eq < IFNAMSIZ && network != std::string::npos &&
                   network > eq,
               "bad interface '", entry, "' in the store");
    Interface it;
    it.name = entry.substr(0, eq);
    try {
      it.address = Address::parse(entry.substr(eq + 1, network - eq - 1));
    } catch (const Error& e) {
      XCCL_THROW(ErrorKind::kInternal, "bad interface '", entry, "' in the store: ", e.what());
    }
    // Strict decimal, so a stale or foreign value is refused rather than read as some number.
    auto number = [&](size_t from, size_t to, uint32_t* value) {
      const auto [end, error] = std::from_chars(entry.data() + from, entry.data() + to, *value);
      return error == std::errc() && end == entry.data() + to && to > from;
    };
    // A published address is a bound listener's (port 1-65535); the subnet is the mask's.
    XCCL_CHECK(number(network + 1, mask, &it.network) && number(mask + 1, entry.size(), &it.mask) &&
                   (it.network & ~it.mask) == 0 && port(it.address) != 0,
               "bad interface '", entry, "' in the store");
    out.push_back(std::move(it));
  }
  XCCL_CHECK(!out.empty(), "empty interface list in the store");
  return out;
}

std::vector<std::pair<int, int>> pairInterfaces(const std::vector<Interface>& dialer,
                                                const std::vector<Interface>& acceptor,
                                                bool named) {
  std::vector<std::pair<int, int>> pairs;
  std::vector<bool> taken(acceptor.size(), false);
  const bool oneHost = host(dialer[0].address) == host(acceptor[0].address);
  const size_t first = named ? 0 : 1;
  if (!named) {
    pairs.emplace_back(0, 0);
    taken[0] = true;
  }
  for (size_t d = first; d < dialer.size(); ++d) {
    for (size_t a = first; a < acceptor.size(); ++a) {
      const bool sameAddress = host(dialer[d].address) == host(acceptor[a].address);
      if (taken[a] || !sameSubnet(dialer[d], acceptor[a]) || (!named && sameAddress != oneHost)) {
        continue;
      }
      pairs.emplace_back(static_cast<int>(d), static_cast<int>(a));
      taken[a] = true;
      break;
    }
    if (named && (pairs.empty() || pairs.back().first != static_cast<int>(d)) &&
        d < acceptor.size() && !taken[d]) {
      pairs.emplace_back(static_cast<int>(d), static_cast<int>(d));  // by position
      taken[d] = true;
    }
  }
  if (pairs.empty()) pairs.emplace_back(0, 0);
  return pairs;
}

}  // namespace xccl::net::tcp
