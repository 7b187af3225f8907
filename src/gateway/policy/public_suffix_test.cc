#include "gateway/policy/public_suffix.h"

#include <gtest/gtest.h>

namespace vessel::gateway::policy {
namespace {

TEST(PublicSuffixTest, RegistriesAndProvidersArePublic) {
  for (const char* s : {"com", "uk", "co.uk", "github.io", "s3.amazonaws.com", "test", "internal"})
    EXPECT_TRUE(isPublicSuffix(s)) << s;
}

TEST(PublicSuffixTest, RegisteredNamesAreNot) {
  for (const char* s : {"example.com", "bbc.co.uk", "octocat.github.io", "a.test", "x.a.test"})
    EXPECT_FALSE(isPublicSuffix(s)) << s;
}

}  // namespace
}  // namespace vessel::gateway::policy
