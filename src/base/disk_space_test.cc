#include "base/disk_space.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vessel {
namespace {

using ::testing::HasSubstr;

TEST(DiskSpaceTest, RefusesBelowTheThresholdNamingTheDirAndWhatIsFree) {
  auto free_mib = freeDiskMib("/tmp");
  ASSERT_TRUE(free_mib.ok()) << free_mib.error().message();
  EXPECT_TRUE(checkFreeDisk("/tmp", 1, "create").ok());
  EXPECT_TRUE(checkFreeDisk("/tmp", 0, "create").ok());  // 0: no threshold
  // More than any disk here has: refused, with the numbers.
  Status s = checkFreeDisk("/tmp", *free_mib + (uint64_t{1} << 30), "pause");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kResourceExhausted);
  EXPECT_THAT(s.error().message(), HasSubstr("pause refused: the state disk is nearly full"));
  EXPECT_THAT(s.error().message(), HasSubstr("/tmp has "));
  EXPECT_THAT(s.error().message(), HasSubstr("MiB free"));
}

TEST(DiskSpaceTest, AMissingDirIsAnError) {
  Status s = checkFreeDisk("/nonexistent/vessel-state", 1, "create");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().code(), Code::kResourceExhausted);
}

}  // namespace
}  // namespace vessel
