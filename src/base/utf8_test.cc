#include "base/utf8.h"

#include <gtest/gtest.h>

namespace vessel {
namespace {

TEST(Utf8Test, KeepsWellFormedTextAndReplacesTheRest) {
  EXPECT_EQ(toValidUtf8("plain ascii\t\n"), "plain ascii\t\n");
  EXPECT_EQ(toValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(toValidUtf8("a\xFF"
                        "b"),
            "a" + r + "b");
  EXPECT_EQ(toValidUtf8("\xC3"), r) << "cut short";
  EXPECT_EQ(toValidUtf8("\xC0\xAF"), r + r) << "overlong";
  EXPECT_EQ(toValidUtf8("\xED\xA0\x80"), r + r + r) << "a surrogate";
  EXPECT_EQ(toValidUtf8("\xF4\x90\x80\x80"), r + r + r + r) << "past U+10FFFF";
  EXPECT_EQ(toValidUtf8(std::string("a\0b", 3)), std::string("a\0b", 3))
      << "NUL is UTF-8; JSON escapes it";
}

}  // namespace
}  // namespace vessel
