#include "api/volume_requests.h"

#include <gtest/gtest.h>

namespace vessel::api {
namespace {

TEST(VolumeRequestsTest, NamesFitRoutesAndPaths) {
  for (const std::string ok : {"a", "data", "my-vol_1.2", "0abc"})
    EXPECT_TRUE(validVolumeName(ok)) << ok;
  EXPECT_TRUE(validVolumeName(std::string(63, 'x')));
  for (const char* bad : {"", "-a", ".a", "_a", "A", "a/b", "a:b", "a b", "é"})
    EXPECT_FALSE(validVolumeName(bad)) << bad;
  EXPECT_FALSE(validVolumeName(std::string(64, 'x')));
}

TEST(VolumeRequestsTest, BodiesAreCheckedFieldByField) {
  auto r = parseVolumeRequest(R"({"name":"data","size_mib":1024})", true, 16, 65536);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->name, "data");
  EXPECT_EQ(r->size_mib, 1024u);
  for (const char* bad : {R"({"name":"data"})", R"({"name":"data","size_mib":15})",
                          R"({"name":"data","size_mib":65537})", R"({"size_mib":64})",
                          R"({"name":"Data","size_mib":64})", R"({"name":"d","size_mib":"64"})",
                          R"({"name":"d","size_mib":64,"x":1})", "[]", "not json"}) {
    auto e = parseVolumeRequest(bad, true, 16, 65536);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.error().code(), Code::kInvalidArgument) << bad;
  }
  auto copy = parseVolumeRequest(R"({"name":"snap"})", false, 16, 65536);
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(copy->size_mib, 0u);
  EXPECT_FALSE(parseVolumeRequest(R"({"name":"snap","size_mib":64})", false, 16, 65536).ok());
}

}  // namespace
}  // namespace vessel::api
