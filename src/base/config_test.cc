#include "base/config.h"

#include <gtest/gtest.h>

namespace vessel {
namespace {

TEST(ConfigTest, ParsesHostPort) {
  auto hp = parseHostPort("127.0.0.1:8080");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 8080);
  EXPECT_FALSE(parseHostPort("127.0.0.1").ok());
  EXPECT_FALSE(parseHostPort("127.0.0.1:99999").ok());
  EXPECT_FALSE(parseHostPort("localhost:80").ok());
  EXPECT_FALSE(parseHostPort("127.0.0.1:8x").ok());
}

TEST(ConfigTest, AccelModes) {
  EXPECT_EQ(*parseAccelMode("tcg"), AccelMode::kTcg);
  EXPECT_EQ(*parseAccelMode("auto"), AccelMode::kAuto);
  auto bad = parseAccelMode("xen");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("auto, kvm or tcg"), std::string::npos);
}

TEST(ConfigTest, ValidateNamesTheBadField) {
  Config c;
  c.kernel = "/nonexistent/vmlinux";
  c.minimal_image = "/etc/hostname";
  auto s = c.validate();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kNotFound);
  EXPECT_NE(s.error().message().find("kernel /nonexistent/vmlinux"), std::string::npos);
  c.kernel = "/etc/hostname";
  c.state_dir = "relative";
  EXPECT_FALSE(c.validate().ok());
  c.state_dir = "/tmp/x";
  EXPECT_TRUE(c.validate().ok());
  EXPECT_EQ(c.listen_addr.port, 8080);
  EXPECT_EQ(c.data_listen_addr.port, 8081);
  EXPECT_EQ(c.data_url, "http://127.0.0.1:8081");
  c.data_listen = "nohost";
  EXPECT_FALSE(c.validate().ok());
}

}  // namespace
}  // namespace vessel
