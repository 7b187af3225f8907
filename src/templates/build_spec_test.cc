#include "templates/build_spec.h"

#include <gtest/gtest.h>

namespace vessel::templates {
namespace {

TEST(BuildSpecTest, ParsesEveryFieldAndDefaults) {
  auto s = parseBuildSpec(R"({"name": "py", "base": "debian", "files": {"/etc/x": "y"},
    "commands": ["true"], "env": {"A": "1"}, "start": "srv", "ready": "ok", "vcpus": 2,
    "memory_mib": 512})");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->name, "py");
  EXPECT_EQ(s->base, "debian");
  EXPECT_EQ(s->files.at("/etc/x"), "y");
  EXPECT_EQ(s->env, std::vector<std::string>{"A=1"});
  EXPECT_EQ(s->vcpus, 2u);
  EXPECT_EQ(s->memory_mib, 512u);
  auto d = parseBuildSpec(R"({"name": "p"})");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->base, "minimal");
  EXPECT_EQ(canonicalSpec(*d),
            canonicalSpec(*parseBuildSpec(R"({"base": "minimal", "name": "p"})")));
}

TEST(BuildSpecTest, RefusesWhatItCannotBuild) {
  for (const char* bad : {"", "[]", R"({})", R"({"name": "a b"})", R"({"name": "p", "x": 1})",
                          R"({"name": "p", "files": {"rel": "x"}})", R"({"name": "p", "vcpus": 0})",
                          R"({"name": "p", "memory_mib": 8})", R"({"name": "p", "env": []})"})
    EXPECT_EQ(parseBuildSpec(bad).error().code(), Code::kInvalidArgument) << bad;
  EXPECT_FALSE(parseBuildSpec(std::string(2 << 20, ' ')).ok());
}

// The fuzzer's finding: {"A=B": "c"} and {"A": "B=c"} were the same entry
// "A=B=c", so a spec holding both lost one on its way to a node.
TEST(BuildSpecTest, EnvNamesAreNamesAnEntryCannotBeSplitTwoWays) {
  for (const std::string& bad : {std::string(R"({"name": "p", "env": {"A=B": "c"}})"),
                                 std::string(R"({"name": "p", "env": {"": "c"}})"),
                                 std::string(R"({"name": "p", "env": {"9A": "c"}})"),
                                 std::string(R"({"name": "p", "env": {"A-B": "c"}})"),
                                 std::string(R"({"name": "p", "env": {"A\u0000": "c"}})"),
                                 std::string(R"({"name": "p", "env": {"A": "c\u0000d"}})")}) {
    auto r = parseBuildSpec(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << bad;
      EXPECT_NE(r.error().message().find("env"), std::string::npos) << r.error().message();
    }
  }
  auto s = parseBuildSpec(R"({"name": "p", "env": {"A": "B=c", "_x9": ""}})");
  ASSERT_TRUE(s.ok()) << s.error().message();
  auto back = parseBuildSpec(specJson(*s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->env, s->env);
}

// What an API replica sends the node that builds: the same spec back.
TEST(BuildSpecTest, SpecJsonParsesBackToTheSameSpec) {
  auto s = parseBuildSpec(
      R"({"name": "p", "base": "debian", "files": {"/etc/x": "y"}, "commands": ["a", "b"],
          "env": {"A": "1", "B": "x=y"}, "start": "s", "ready": "r", "vcpus": 2,
          "memory_mib": 512, "disk_mib": 4096})");
  ASSERT_TRUE(s.ok()) << s.error().message();
  auto back = parseBuildSpec(specJson(*s));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(canonicalSpec(*back), canonicalSpec(*s));
  EXPECT_EQ(back->env, s->env);
  EXPECT_EQ(back->disk_mib, 4096u);
}

TEST(BuildSpecTest, FromImageIsCanonicalHashedAndRoundTrips) {
  auto s = parseBuildSpec(R"({"name": "u", "from_image": "ubuntu:22.04", "image_cmd": true})");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->from_image, "docker.io/library/ubuntu:22.04");
  EXPECT_TRUE(s->image_cmd);
  // Two spellings of one image are one version; another image is another.
  auto same = parseBuildSpec(
      R"({"name": "u", "from_image": "docker.io/library/ubuntu:22.04", "image_cmd": true})");
  EXPECT_EQ(canonicalSpec(*same), canonicalSpec(*s));
  auto other = parseBuildSpec(R"({"name": "u", "from_image": "ubuntu:24.04", "image_cmd": true})");
  EXPECT_NE(canonicalSpec(*other), canonicalSpec(*s));
  auto back = parseBuildSpec(specJson(*s));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->from_image, s->from_image);
  EXPECT_TRUE(back->image_cmd);
  EXPECT_EQ(canonicalSpec(*back), canonicalSpec(*s));
  // A spec without an image hashes as it did before from_image existed.
  EXPECT_EQ(canonicalSpec(*parseBuildSpec(R"({"name": "p"})")).find("from_image"),
            std::string::npos);
}

TEST(BuildSpecTest, RefusesBadImageFields) {
  for (const char* bad :
       {R"({"name": "p", "from_image": "Bad Ref"})", R"({"name": "p", "from_image": 3})",
        R"({"name": "p", "from_image": "a", "base": "debian"})",
        R"({"name": "p", "image_cmd": true})",
        R"({"name": "p", "from_image": "a", "image_cmd": 1})",
        R"({"name": "p", "from_image": "a", "image_cmd": true, "start": "x"})"}) {
    auto r = parseBuildSpec(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << bad;
    }
  }
  EXPECT_NE(
      parseBuildSpec(R"({"name": "p", "from_image": "Bad"})").error().message().find("from_image"),
      std::string::npos);
}

}  // namespace
}  // namespace vessel::templates
