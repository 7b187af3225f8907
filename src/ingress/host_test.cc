#include "ingress/host.h"

#include <gtest/gtest.h>

namespace vessel::ingress {
namespace {

TEST(SandboxHostTest, ParsesPortAndIdUnderTheDomain) {
  auto h =
      parseSandboxHost("8000-sb-0afe63d8c20f.vessel.localhost:49983", "vessel.localhost:49983");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->port, 8000);
  EXPECT_EQ(h->sandbox_id, "sb-0afe63d8c20f");
  // The listener's port on either side does not matter; case and a final dot neither.
  EXPECT_EQ(parseSandboxHost("8000-SB-1.Vessel.Localhost.", "vessel.localhost:1"),
            (SandboxHost{8000, "sb-1"}));
  EXPECT_EQ(parseSandboxHost("65535-x.example.test", "example.test"), (SandboxHost{65535, "x"}));
  EXPECT_EQ(parseSandboxHost("49983-sb-1.example.test", "example.test"),
            (SandboxHost{49983, "sb-1"}));
}

TEST(SandboxHostTest, RefusesWhatIsNotASandboxPort) {
  const char* dom = "vessel.localhost";
  for (const char* bad :
       {"", "vessel.localhost", "localhost:49983", "127.0.0.1:49983", "[::1]:49983",
        "8000-sb-1.other.test", "8000-sb-1.xvessel.localhost", "a.8000-sb-1.vessel.localhost",
        "8000-sb-1.a.vessel.localhost", "0-sb-1.vessel.localhost", "08000-sb-1.vessel.localhost",
        "65536-sb-1.vessel.localhost", "123456-sb-1.vessel.localhost", "-sb-1.vessel.localhost",
        "80a0-sb-1.vessel.localhost", "8000-.vessel.localhost", "8000-sb_1.vessel.localhost",
        "8000.vessel.localhost", ".vessel.localhost"})
    EXPECT_FALSE(parseSandboxHost(bad, dom)) << bad;
  EXPECT_FALSE(parseSandboxHost("8000-" + std::string(65, 'a') + ".vessel.localhost", dom));
  EXPECT_FALSE(parseSandboxHost("8000-sb-1.vessel.localhost", ""));
  EXPECT_FALSE(parseSandboxHost(std::string(300, 'a') + ".vessel.localhost", dom));
}

TEST(SandboxHostTest, HostName) {
  EXPECT_EQ(hostName("A.b:80"), "a.b");
  EXPECT_EQ(hostName("[::1]:80"), "[::1]");
  EXPECT_EQ(hostName("x."), "x");
  EXPECT_EQ(hostName(""), "");
}

}  // namespace
}  // namespace vessel::ingress
