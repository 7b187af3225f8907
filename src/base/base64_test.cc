#include "base/base64.h"

#include <gtest/gtest.h>

namespace vessel {
namespace {

TEST(Base64Test, RoundTripsEveryLengthAndBothAlphabets) {
  EXPECT_EQ(base64Encode(""), "");
  EXPECT_EQ(base64Encode("f"), "Zg==");
  EXPECT_EQ(base64Encode("fo"), "Zm8=");
  EXPECT_EQ(base64Encode("foo"), "Zm9v");
  EXPECT_EQ(base64Encode("\xfb\xff"), "+/8=");
  for (std::string s : {"", "a", "ab", "abc", "abcd", "\x00\xff\xfe\x01"}) {
    auto d = base64Decode(base64Encode(s), 1024);
    ASSERT_TRUE(d.ok()) << s;
    EXPECT_EQ(*d, s);
  }
  auto url = base64Decode("-_8", 1024);  // base64url, unpadded
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(*url, "\xfb\xff");
}

TEST(Base64Test, RefusesGarbageAndOversizedInput) {
  EXPECT_FALSE(base64Decode("!!!!", 1024).ok());
  EXPECT_FALSE(base64Decode(std::string(2000, 'A'), 1024).ok());
}

}  // namespace
}  // namespace vessel
