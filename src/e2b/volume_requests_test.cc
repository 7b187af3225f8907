// E2B's Volume API requests at the edge (volume_requests.h).
#include "e2b/volume_requests.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "e2b/requests.h"

namespace vessel::e2b {
namespace {

using ::testing::HasSubstr;

TEST(E2bVolumeRequests, NewVolumeNamesAreE2bsAsFarAsVesselsAllow) {
  EXPECT_EQ(parseNewVolume(R"({"name":"my-vol_1"})").value(), "my-vol_1");
  for (const char* body :
       {R"({"name":"Data"})", R"({"name":"_x"})", R"({"name":"a.b"})", R"({"name":""})", R"({})",
        R"({"name":"x","size":1})", R"({"name":7})", R"([])",
        R"({"name":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})"}) {
    auto r = parseNewVolume(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << body;
  }
  EXPECT_TRUE(volumeIdShape("vol-3f9a0c1d2e4b"));
  EXPECT_FALSE(volumeIdShape("vol-"));
  EXPECT_FALSE(volumeIdShape("sb-3f9a0c1d2e4b"));
  EXPECT_FALSE(volumeIdShape("vol-../x"));
}

TEST(E2bVolumeRequests, ContentQueriesTakeEachRoutesParameters) {
  auto l =
      parseContentQuery("/volumecontent/vol-1/dir?path=%2Fa%20b&depth=3", ContentRoute::kListDir);
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_EQ(l->path, "/a b");
  EXPECT_EQ(l->depth, 3);
  auto w = parseContentQuery("/x?path=/f&uid=1000&gid=100&mode=420&force=true",
                             ContentRoute::kWriteFile);
  ASSERT_TRUE(w.ok()) << w.error().message();
  EXPECT_EQ(w->meta.uid, 1000u);
  EXPECT_EQ(w->meta.gid, 100u);
  EXPECT_EQ(w->meta.mode, 0644u);
  EXPECT_TRUE(w->force);
  auto plain = parseContentQuery("/x?path=/f", ContentRoute::kMakeDir);
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->meta.uid);
  EXPECT_FALSE(plain->force);
  EXPECT_EQ(plain->depth, 1);
  for (auto [target, route] : std::vector<std::pair<const char*, ContentRoute>>{
           {"/x", ContentRoute::kPath},
           {"/x?path=", ContentRoute::kPath},
           {"/x?path=/f&depth=2", ContentRoute::kPath},  // not this route's
           {"/x?path=/f&uid=1", ContentRoute::kFile},
           {"/x?path=/f&depth=0", ContentRoute::kListDir},
           {"/x?path=/f&depth=65", ContentRoute::kListDir},
           {"/x?path=/f&depth=-1", ContentRoute::kListDir},
           {"/x?path=/f&depth=1x", ContentRoute::kListDir},
           {"/x?path=/f&uid=4294967295", ContentRoute::kWriteFile},
           {"/x?path=/f&mode=4096", ContentRoute::kWriteFile},
           {"/x?path=/f&force=yes", ContentRoute::kMakeDir},
           {"/x?path=/f&path=/g", ContentRoute::kPath},
       }) {
    auto r = parseContentQuery(target, route);
    ASSERT_FALSE(r.ok()) << target;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << target;
  }
}

TEST(E2bVolumeRequests, MetadataPatches) {
  auto m = parseMetadataPatch(R"({"uid":1000,"gid":null,"mode":493})");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_EQ(m->uid, 1000u);
  EXPECT_FALSE(m->gid);
  EXPECT_EQ(m->mode, 0755u);
  EXPECT_TRUE(parseMetadataPatch("{}").ok());
  for (const char* body : {R"({"mode":4096})", R"({"uid":-1})", R"({"uid":"1"})", R"({"owner":1})",
                           R"({"gid":4294967295})", "nope"})
    EXPECT_FALSE(parseMetadataPatch(body).ok()) << body;
}

TEST(E2bVolumeRequests, SandboxVolumeMounts) {
  auto s = parseNewSandbox(
      R"({"templateID":"base","volumeMounts":[{"name":"data","path":"/data"},{"name":"m","path":"/mnt/m"}]})",
      false);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(s->volumes.size(), 2u);
  EXPECT_EQ(s->volumes[1].name, "m");
  EXPECT_EQ(s->volumes[1].path, "/mnt/m");
  EXPECT_TRUE(
      parseNewSandbox(R"({"templateID":"base","volumeMounts":null})", true)->volumes.empty());
  std::string many = R"({"templateID":"base","volumeMounts":[)";
  for (int i = 0; i < 17; ++i)
    many += std::string(i ? "," : "") + R"({"name":"v","path":"/p)" + std::to_string(i) + "\"}";
  many += "]}";
  for (
      const std::string& body : {
          std::string(R"({"templateID":"base","volumeMounts":[{"name":"v","path":"/"}]})"),
          std::string(R"({"templateID":"base","volumeMounts":[{"name":"v","path":"data"}]})"),
          std::string(R"({"templateID":"base","volumeMounts":[{"name":"v","path":"/proc/x"}]})"),
          std::string(R"({"templateID":"base","volumeMounts":[{"name":"v","path":"/a/../b"}]})"),
          std::string(R"({"templateID":"base","volumeMounts":[{"name":"V","path":"/a"}]})"),
          std::string(R"({"templateID":"base","volumeMounts":[{"name":"v"}]})"),
          std::string(R"({"templateID":"base","volumeMounts":[{"name":"v","path":"/a","ro":1}]})"),
          std::string(
              R"({"templateID":"base","volumeMounts":[{"name":"v","path":"/a"},{"name":"w","path":"/a/b"}]})"),
          std::string(R"({"templateID":"base","volumeMounts":{"/a":"v"}})"),
          many,
      }) {
    auto r = parseNewSandbox(body, true);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << body;
    EXPECT_THAT(r.error().message(), HasSubstr("volumeMounts")) << body;
  }
}

}  // namespace
}  // namespace vessel::e2b
