#include "node/network/host_networks.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "os/interfaces.h"

namespace vessel::node::network {

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
  for (const os::InterfaceAddress& a : os::interfaceAddresses()) {
    if (a.loopback || a.link_local_v6) continue;
    std::string n = networkOf(a.bytes.data(), a.size, a.prefix);
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
  }
  return out;
}

}  // namespace vessel::node::network
