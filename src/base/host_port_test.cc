#include "base/host_port.h"

#include <gtest/gtest.h>

namespace vessel {
namespace {

TEST(HostPortTest, ParsesHostPort) {
  auto hp = parseHostPort("127.0.0.1:8080");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 8080);
  EXPECT_FALSE(parseHostPort("127.0.0.1").ok());
  EXPECT_FALSE(parseHostPort("127.0.0.1:99999").ok());
  EXPECT_FALSE(parseHostPort("localhost:80").ok());
  EXPECT_FALSE(parseHostPort("127.0.0.1:8x").ok());
}

}  // namespace
}  // namespace vessel
