#include "base/env_var.h"

#include <gtest/gtest.h>

#include <string>

namespace vessel {
namespace {

TEST(EnvVarTest, PortableNamesAreWhatAShellExports) {
  for (std::string_view ok : {"A", "_", "PATH", "my_var2", "_9"})
    EXPECT_TRUE(portableEnvName(ok)) << ok;
  for (std::string_view no : {"", "9A", "A=B", "A-B", "A.B", "A B", "Ä"})
    EXPECT_FALSE(portableEnvName(no)) << no;
  EXPECT_FALSE(portableEnvName(std::string("A\0B", 3)));
  EXPECT_TRUE(portableEnvName(std::string(255, 'A')));
  EXPECT_FALSE(portableEnvName(std::string(256, 'A')));
  EXPECT_FALSE(portableEnvName("ABCD", 3));
}

TEST(EnvVarTest, AnEntryIsANameAnEqualsSignAndNoNul) {
  for (std::string_view ok : {"A=", "A=b=c", "JAVA.HOME=/j", "x-y=1"})
    EXPECT_TRUE(envEntry(ok)) << ok;
  for (std::string_view no : {"", "A", "=A", "="}) EXPECT_FALSE(envEntry(no)) << no;
  EXPECT_FALSE(envEntry(std::string("A=b\0c", 5)));
  EXPECT_FALSE(envEntry(std::string("A\0=b", 4)));
  EXPECT_TRUE(envValue("b=c"));
  EXPECT_FALSE(envValue(std::string("\0", 1)));
}

}  // namespace
}  // namespace vessel
