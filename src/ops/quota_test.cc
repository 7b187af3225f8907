#include "ops/quota.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vessel::ops {
namespace {

using ::testing::HasSubstr;

Demand sandboxes(int n, uint64_t memory_mib) { return Demand{n, memory_mib, 0, 0}; }

TEST(QuotaTest, CountsAndMemoryAgainstTheTenantsOwnLimitsFirst) {
  QuotaDefaults d{3, 1024};
  store::TenantUsage use{2, 512};
  EXPECT_FALSE(overQuota({}, use, d, sandboxes(1, 256)).has_value());
  auto n = overQuota({}, use, d, sandboxes(2, 256));
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->code(), Code::kResourceExhausted);
  EXPECT_THAT(n->message(), HasSubstr("2 of at most 3 sandboxes"));
  auto m = overQuota({}, use, d, sandboxes(1, 768));
  ASSERT_TRUE(m.has_value());
  EXPECT_THAT(m->message(), HasSubstr("512 MiB of at most 1024 MiB"));
  // A tenant's own limits win over the defaults.
  store::TenantLimits own{10, 4096};
  EXPECT_FALSE(overQuota(own, use, d, sandboxes(2, 768)).has_value());
  // A resume brings memory back but no new sandbox.
  EXPECT_FALSE(overQuota({}, store::TenantUsage{3, 0}, d, sandboxes(0, 256)).has_value());
}

TEST(QuotaTest, VcpusOfRunningSandboxes) {
  QuotaDefaults d{20, 1 << 20, 4, 1 << 20};
  store::TenantUsage use{3, 768, 3, 0};
  EXPECT_FALSE(overQuota({}, use, d, Demand{1, 256, 1, 0}).has_value());
  auto e = overQuota({}, use, d, Demand{1, 256, 2, 0});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), Code::kResourceExhausted);
  EXPECT_THAT(e->message(), HasSubstr("3 of at most 4 vCPUs and this needs 2"));
  store::TenantLimits own;
  own.max_vcpus = 8;
  EXPECT_FALSE(overQuota(own, use, d, Demand{1, 256, 2, 0}).has_value());
}

TEST(QuotaTest, DiskAddsUpToTheLimitAndNoFurther) {
  QuotaDefaults d{20, 1 << 20, 64, 4096};
  // Two 1 GiB sandboxes, one of them paused with 512 MiB of saved memory:
  // 2560 MiB (TenantUsage as the store sums it; the lifecycle adds templates).
  store::TenantUsage use{2, 512, 1, 1024 + 1024 + 512};
  EXPECT_FALSE(overQuota({}, use, d, Demand{1, 0, 0, 4096 - 2560}).has_value());
  auto e = overQuota({}, use, d, Demand{1, 0, 0, 4096 - 2560 + 1});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code(), Code::kResourceExhausted);
  EXPECT_THAT(e->message(), HasSubstr("2560 MiB of at most 4096 MiB and this needs 1537 MiB"));
  // A fork's copies: each one's disk, all together.
  EXPECT_TRUE(overQuota({}, use, d, Demand{2, 0, 0, 2 * 1024}).has_value());
  store::TenantLimits own;
  own.max_disk_mib = 8192;
  EXPECT_FALSE(overQuota(own, use, d, Demand{2, 0, 0, 2 * 1024}).has_value());
}

}  // namespace
}  // namespace vessel::ops
