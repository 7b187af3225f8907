#include "node/network/host_networks.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace vessel::node::network {

namespace {

int prefixOf(const uint8_t* mask, size_t size) {
  int n = 0;
  for (size_t i = 0; i < size; ++i) n += __builtin_popcount(mask[i]);
  return n;
}

}  // namespace

std::string networkOf(const uint8_t* address, size_t size, int prefix) {
  uint8_t net[16] = {};
  std::memcpy(net, address, std::min<size_t>(size, sizeof net));
  for (size_t i = 0; i < size; ++i) {
    int keep = std::clamp(prefix - static_cast<int>(i) * 8, 0, 8);
    net[i] &= static_cast<uint8_t>(keep == 0 ? 0 : 0xff << (8 - keep));
  }
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(size == 4 ? AF_INET : AF_INET6, net, text, sizeof text);
  return std::string(text) + "/" + std::to_string(prefix);
}

std::vector<std::string> hostNetworks() {
  std::vector<std::string> out;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || !i->ifa_netmask || (i->ifa_flags & IFF_LOOPBACK)) continue;
    std::string n;
    if (i->ifa_addr->sa_family == AF_INET) {
      // SAFETY: the family says both are sockaddr_in.
      const auto* a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      const auto* m = reinterpret_cast<const sockaddr_in*>(i->ifa_netmask);
      const auto* ab = reinterpret_cast<const uint8_t*>(&a->sin_addr);
      n = networkOf(ab, 4, prefixOf(reinterpret_cast<const uint8_t*>(&m->sin_addr), 4));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      // SAFETY: the family says both are sockaddr_in6.
      const auto* a = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      const auto* m = reinterpret_cast<const sockaddr_in6*>(i->ifa_netmask);
      if (IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr)) continue;
      const auto* ab = reinterpret_cast<const uint8_t*>(&a->sin6_addr);
      n = networkOf(ab, 16, prefixOf(reinterpret_cast<const uint8_t*>(&m->sin6_addr), 16));
    } else {
      continue;
    }
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
  }
  ::freeifaddrs(ifs);
  return out;
}

}  // namespace vessel::node::network
