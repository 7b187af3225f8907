#include "os/interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstring>

namespace vessel::os {

namespace {

int prefixOf(const uint8_t* mask, size_t size) {
  int n = 0;
  for (size_t i = 0; i < size; ++i) n += __builtin_popcount(mask[i]);
  return n;
}

}  // namespace

std::vector<InterfaceAddress> interfaceAddresses() {
  std::vector<InterfaceAddress> out;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return out;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    InterfaceAddress a;
    a.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    if (i->ifa_addr->sa_family == AF_INET) {
      // SAFETY: the family says both are sockaddr_in.
      const auto* sin = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
      std::memcpy(a.bytes.data(), &sin->sin_addr, 4);
      if (i->ifa_netmask)
        a.prefix = prefixOf(reinterpret_cast<const uint8_t*>(
                                &reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr),
                            4);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      // SAFETY: the family says both are sockaddr_in6.
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      a.v6 = true;
      a.size = 16;
      std::memcpy(a.bytes.data(), &sin6->sin6_addr, 16);
      a.link_local_v6 = IN6_IS_ADDR_LINKLOCAL(&sin6->sin6_addr);
      if (i->ifa_netmask)
        a.prefix = prefixOf(reinterpret_cast<const uint8_t*>(
                                &reinterpret_cast<const sockaddr_in6*>(i->ifa_netmask)->sin6_addr),
                            16);
    } else {
      continue;
    }
    out.push_back(a);
  }
  ::freeifaddrs(ifs);
  return out;
}

}  // namespace vessel::os
