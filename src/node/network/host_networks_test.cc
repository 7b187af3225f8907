#include "node/network/host_networks.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

namespace vessel::node::network {
namespace {

std::string net4(const char* addr, int prefix) {
  uint8_t b[4];
  inet_pton(AF_INET, addr, b);
  return networkOf(b, 4, prefix);
}

std::string net6(const char* addr, int prefix) {
  uint8_t b[16];
  inet_pton(AF_INET6, addr, b);
  return networkOf(b, 16, prefix);
}

TEST(HostNetworksTest, HostBitsAreCleared) {
  EXPECT_EQ(net4("203.0.113.7", 24), "203.0.113.0/24");
  EXPECT_EQ(net4("10.1.2.3", 8), "10.0.0.0/8");
  EXPECT_EQ(net4("192.168.5.130", 25), "192.168.5.128/25");
  EXPECT_EQ(net4("198.51.100.9", 32), "198.51.100.9/32");
  EXPECT_EQ(net4("1.2.3.4", 0), "0.0.0.0/0");
  EXPECT_EQ(net6("2001:db8:1:2::99", 64), "2001:db8:1:2::/64");
  EXPECT_EQ(net6("2001:db8::1", 127), "2001:db8::/127");
}

TEST(HostNetworksTest, ThisNamespacesNetworksAreListedWithoutLoopback) {
  auto nets = hostNetworks();
  for (const auto& n : nets) {
    EXPECT_NE(n.find('/'), std::string::npos) << n;
    EXPECT_NE(n.rfind("127.", 0), 0u) << n;
    EXPECT_NE(n, "::1/128");
  }
}

}  // namespace
}  // namespace vessel::node::network
