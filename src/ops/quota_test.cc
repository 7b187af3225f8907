#include "ops/quota.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vessel::ops {
namespace {

using ::testing::HasSubstr;

TEST(QuotaTest, CountsAndMemoryAgainstTheTenantsOwnLimitsFirst) {
  QuotaDefaults d{3, 1024};
  store::TenantUsage use{2, 512};
  EXPECT_FALSE(overQuota({}, use, d, 256, 1).has_value());
  auto n = overQuota({}, use, d, 256, 2);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->code(), Code::kResourceExhausted);
  EXPECT_THAT(n->message(), HasSubstr("2 of at most 3 sandboxes"));
  auto m = overQuota({}, use, d, 768, 1);
  ASSERT_TRUE(m.has_value());
  EXPECT_THAT(m->message(), HasSubstr("512 MiB of at most 1024 MiB"));
  // A tenant's own limits win over the defaults.
  store::TenantLimits own{10, 4096};
  EXPECT_FALSE(overQuota(own, use, d, 768, 2).has_value());
  // A resume brings memory back but no new sandbox.
  EXPECT_FALSE(overQuota({}, store::TenantUsage{3, 0}, d, 256, 0).has_value());
}

}  // namespace
}  // namespace vessel::ops
