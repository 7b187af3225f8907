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

}  // namespace
}  // namespace vessel::templates
