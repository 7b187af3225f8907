#pragma once
// The IPv4 and IPv6 addresses of this network namespace's interfaces
// (getifaddrs), with their prefix lengths: the gateway refuses them as
// destinations, and vesseld refuses the networks they are on.
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace vessel::os {

struct InterfaceAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // network order; the first 4 for IPv4
  size_t size = 4;                  // 4 or 16
  int prefix = 0;                   // from the netmask
  bool loopback = false;
  bool link_local_v6 = false;  // fe80::/10
};

// Empty when getifaddrs fails.
std::vector<InterfaceAddress> interfaceAddresses();

}  // namespace vessel::os
