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

namespace vessel::templates {
namespace {

TEST(BuildSpecTest, StepsCarryEachKindAndRefuseMixedOrBadOnes) {
  auto s = parseBuildSpec(R"({"name": "d", "start": ["srv", "--port", "1"], "start_user": "1000",
    "start_cwd": "/srv", "steps": [
      {"line": 3, "text": "RUN x", "run": ["/bin/sh", "-c", "x"], "user": "app", "workdir": "/w",
       "env": ["A=1"]},
      {"line": 4, "write": "/w/f", "content_base64": "aGk=", "mode": 493, "owner": "app:app"},
      {"mkdir": "/w/d"},
      {"unpack": "/opt", "content_base64": ""}]})");
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_EQ(s->steps.size(), 4u);
  // An argument may be empty; only the program must be named.
  EXPECT_TRUE(parseBuildSpec(R"({"name": "d", "steps": [{"run": ["printf", "%s", ""]}]})").ok());
  EXPECT_EQ(s->steps[0].kind, BuildStep::Kind::kRun);
  EXPECT_EQ(s->steps[0].user, "app");
  EXPECT_EQ(s->steps[0].line, 3u);
  EXPECT_EQ(s->steps[1].content, "hi");
  EXPECT_EQ(s->steps[1].mode, 0755u);
  EXPECT_EQ(s->steps[2].mode, 0755u) << "directories default to 0755";
  EXPECT_EQ(s->steps[3].kind, BuildStep::Kind::kUnpack);
  EXPECT_EQ(s->start_argv, (std::vector<std::string>{"srv", "--port", "1"}));
  auto back = parseBuildSpec(specJson(*s));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(canonicalSpec(*back), canonicalSpec(*s));
  // A spec without steps keeps the canonical text (and so the version) it had.
  EXPECT_EQ(canonicalSpec(*parseBuildSpec(R"({"name": "p"})")).find("steps"), std::string::npos);

  for (const char* bad : {
           R"({"name": "d", "steps": {}})",
           R"({"name": "d", "steps": [{}]})",
           R"({"name": "d", "steps": [{"run": ["a"], "write": "/x"}]})",
           R"({"name": "d", "steps": [{"run": []}]})",
           R"({"name": "d", "steps": [{"run": [""]}]})",
           R"({"name": "d", "steps": [{"run": ["", "x"]}]})",
           R"({"name": "d", "steps": [{"run": ["a\u0000b"]}]})",
           R"({"name": "d", "steps": [{"run": ["a"], "mode": 1}]})",
           R"({"name": "d", "steps": [{"write": "rel"}]})",
           R"({"name": "d", "steps": [{"write": "/x", "mode": 4096}]})",
           R"({"name": "d", "steps": [{"write": "/x", "owner": "a b"}]})",
           R"({"name": "d", "steps": [{"write": "/x", "content_base64": "!!"}]})",
           R"({"name": "d", "steps": [{"mkdir": "/x", "content_base64": ""}]})",
           R"({"name": "d", "steps": [{"run": ["a"], "env": ["NOEQUALS"]}]})",
           R"({"name": "d", "steps": [{"run": ["a"], "other": 1}]})",
           R"({"name": "d", "start": []})",
           R"({"name": "d", "start_cwd": "rel"})",
           R"({"name": "d", "start_user": "a b"})",
       })
    EXPECT_EQ(parseBuildSpec(bad).error().code(), Code::kInvalidArgument) << bad;
}

}  // namespace
}  // namespace vessel::templates

namespace vessel::templates {
namespace {

TEST(BuildSpecTest, NoCacheSaysHowNotWhatAndTravelsToTheNode) {
  auto plain = parseBuildSpec(R"({"name": "n", "commands": ["true"]})");
  auto forced = parseBuildSpec(R"({"name": "n", "commands": ["true"], "no_cache": true})");
  ASSERT_TRUE(plain.ok() && forced.ok());
  EXPECT_FALSE(plain->no_cache);
  EXPECT_TRUE(forced->no_cache);
  // The same template: --no-cache changes how it is built, not what it is.
  EXPECT_EQ(canonicalSpec(*plain), canonicalSpec(*forced));
  auto back = parseBuildSpec(specJson(*forced));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_TRUE(back->no_cache);
  EXPECT_FALSE(parseBuildSpec(specJson(*plain))->no_cache);
  auto bad = parseBuildSpec(R"({"name": "n", "no_cache": "yes"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("no_cache"), std::string::npos);
}

}  // namespace
}  // namespace vessel::templates

namespace vessel::templates {
namespace {

TEST(BuildSpecTest, ARegistryCredentialIsANameThatNeedsAnImage) {
  auto s = parseBuildSpec(
      R"({"name": "p", "from_image": "registry.lan:5000/app:1", "from_image_credential": "lan-reg"})");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->from_image_credential, "lan-reg");
  auto back = parseBuildSpec(specJson(*s));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->from_image_credential, "lan-reg");
  // Another credential pulls what may be another image: another version.
  auto other = parseBuildSpec(
      R"({"name": "p", "from_image": "registry.lan:5000/app:1", "from_image_credential": "b"})");
  EXPECT_NE(canonicalSpec(*s), canonicalSpec(*other));
  // Specs without one keep their canonical text.
  EXPECT_EQ(
      canonicalSpec(*parseBuildSpec(R"({"name": "p", "from_image": "a:1"})")).find("credential"),
      std::string::npos);
  for (const char* bad : {
           R"({"name": "p", "from_image_credential": "x"})",
           R"({"name": "p", "from_image": "a:1", "from_image_credential": "a b"})",
           R"({"name": "p", "from_image": "a:1", "from_image_credential": 3})",
       })
    EXPECT_EQ(parseBuildSpec(bad).error().code(), Code::kInvalidArgument) << bad;
}

}  // namespace
}  // namespace vessel::templates
