#include "api/volume_requests.h"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

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

TEST(VolumeRequestsTest, SandboxMountsAreCheckedAtTheEdge) {
  auto v = boost::json::parse(
      R"([{"name":"data","path":"/data"},{"name":"models","path":"/mnt/m","read_only":true}])");
  auto r = parseVolumeMounts(v);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, "data");
  EXPECT_EQ((*r)[0].path, "/data");
  EXPECT_FALSE((*r)[0].read_only);
  EXPECT_TRUE((*r)[1].read_only);
  for (const char* bad :
       {R"({"name":"d","path":"/d"})", R"([{"name":"d"}])", R"([{"path":"/d"}])",
        R"([{"name":"D","path":"/d"}])", R"([{"name":"d","path":"d"}])",
        R"([{"name":"d","path":"/"}])", R"([{"name":"d","path":"/a/../b"}])",
        R"([{"name":"d","path":"/a//b"}])", R"([{"name":"d","path":"/a/"}])",
        R"([{"name":"d","path":"/proc"}])", R"([{"name":"d","path":"/dev/x"}])",
        R"([{"name":"d","path":"/sys/fs"}])", R"([{"name":"d","path":"/a,b"}])",
        R"([{"name":"d","path":"/d","read_only":"yes"}])", R"([{"name":"d","path":"/d","x":1}])",
        R"([{"name":"a","path":"/d"},{"name":"b","path":"/d"}])",
        R"([{"name":"a","path":"/d"},{"name":"b","path":"/d/e"}])"}) {
    auto e = parseVolumeMounts(boost::json::parse(bad));
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.error().code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(validMountPath("/devices"));  // not /dev
  boost::json::array many;
  for (size_t i = 0; i <= kMaxSandboxVolumes; ++i)
    many.push_back(boost::json::object{{"name", "v"}, {"path", "/v" + std::to_string(i)}});
  EXPECT_FALSE(parseVolumeMounts(many).ok());
}

}  // namespace
}  // namespace vessel::api
