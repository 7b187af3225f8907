#include "gateway/name.h"

#include <gtest/gtest.h>

namespace vessel::gateway {
namespace {

TEST(NameTest, NormalizesCaseAndTrailingDot) {
  EXPECT_EQ(*normalizeName("PyPI.Org."), "pypi.org");
  EXPECT_EQ(*normalizeName("a-b_c.test"), "a-b_c.test");
}

TEST(NameTest, RefusesNonNames) {
  for (const char* bad :
       {"",           ".",         "a..b",       ".a",        "a.b..",
        "a b.test",   "a\tb.test", "a%2eb.test", "a@b.test",  "a/b.test",
        "-a.test",    "a-.test",   "1.2.3.4",    "127.1",     "0x7f.1",
        "2130706433", "[::1]",     "::1",        "a.test:80", "caf\xc3\xa9.test"}) {
    EXPECT_FALSE(normalizeName(bad).ok()) << bad;
  }
  EXPECT_FALSE(normalizeName(std::string(64, 'a') + ".test").ok());
  EXPECT_FALSE(normalizeName(std::string(254, 'a')).ok());
  EXPECT_FALSE(normalizeName(std::string("a\0b.test", 8)).ok());
}

TEST(NameTest, Authority) {
  auto a = parseAuthority("A.test:8443");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->name, "a.test");
  EXPECT_EQ(a->port, 8443);
  EXPECT_FALSE(parseAuthority("a.test").value().port.has_value());
  for (const char* bad : {"a.test@x.test", "a.test:443@x.test", "x.test#.a.test", "a.test\tx.test",
                          "a.test:", "a.test:0", "a.test:65536", "a.test:8o", "[::1]:80",
                          "user:pass@x.test", "a%2ex.test", ""}) {
    EXPECT_FALSE(parseAuthority(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace vessel::gateway
