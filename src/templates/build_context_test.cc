#include "templates/build_context.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace vessel::templates {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class BuildContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vessel-ctx-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  void put(const std::string& rel, const std::string& content, fs::perms mode = fs::perms(0644)) {
    fs::create_directories(fs::path(dir_ + "/" + rel).parent_path());
    std::ofstream(dir_ + "/" + rel, std::ios::binary) << content;
    fs::permissions(dir_ + "/" + rel, mode);
  }
  Result<BuildSpec> build(const std::string& dockerfile, ContextLimits limits = {}) {
    auto plan = parseDockerfile(dockerfile);
    if (!plan.ok()) return std::move(plan).error();
    auto ctx = BuildContext::open(dir_, limits);
    if (!ctx.ok()) return std::move(ctx).error();
    return ctx->spec(*plan, "app");
  }
  // Each step as "kind path mode owner" (content left out).
  static std::vector<std::string> shown(const BuildSpec& s) {
    std::vector<std::string> out;
    for (const auto& st : s.steps) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%o", st.mode);
      switch (st.kind) {
        case BuildStep::Kind::kRun: out.push_back("run " + st.argv.back()); break;
        case BuildStep::Kind::kWrite:
          out.push_back("write " + st.path + " " + mode + " " + st.owner);
          break;
        case BuildStep::Kind::kMkdir:
          out.push_back("mkdir " + st.path + " " + mode + " " + st.owner);
          break;
        case BuildStep::Kind::kUnpack: out.push_back("unpack " + st.path); break;
      }
    }
    return out;
  }
  std::string dir_;
};

TEST_F(BuildContextTest, CopiesFilesTreesAndGlobsWithModesAndOwners) {
  put("run.sh", "#!/bin/sh\n", fs::perms(0755));
  put("a.py", "print(1)\n");
  put("b.py", "print(2)\n");
  put("src/lib/x.txt", "x");
  put("src/y.txt", "y");
  fs::permissions(dir_ + "/src/lib", fs::perms(0700));
  auto s = build(R"(FROM vessel://minimal
WORKDIR /app
COPY run.sh .
COPY *.py py/
COPY --chown=user:user src /app/src
COPY --chmod=0600 a.py /etc/a
RUN ./run.sh
)");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->base, "minimal");
  EXPECT_THAT(
      shown(*s),
      ElementsAre("write /app/run.sh 755 ", "write /app/py/a.py 644 ", "write /app/py/b.py 644 ",
                  "mkdir /app/src 755 user:user", "mkdir /app/src/lib 700 user:user",
                  "write /app/src/lib/x.txt 644 user:user", "write /app/src/y.txt 644 user:user",
                  "write /etc/a 600 ", "run ./run.sh"));
  EXPECT_EQ(s->steps[0].content, "#!/bin/sh\n");
  EXPECT_EQ(s->steps[8].workdir, "/app");
  EXPECT_EQ(s->steps[0].line, 3u);
  // The spec survives its trip to the node that builds it.
  auto back = parseBuildSpec(specJson(*s));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(canonicalSpec(*back), canonicalSpec(*s));
  EXPECT_EQ(back->steps[0].content, "#!/bin/sh\n");
}

TEST_F(BuildContextTest, DockerignoreExcludesWithExceptionsAndDoubleStar) {
  put("keep.txt", "k");
  put("secret.env", "TOKEN=1");
  put("node_modules/m/index.js", "m");
  put("logs/a.log", "a");
  put("logs/keep.log", "k");
  put("deep/x/y/z.tmp", "t");
  put(".dockerignore",
      "# comments\nsecret.env\nnode_modules\nlogs/*.log\n!logs/keep.log\n**/*.tmp\n");
  auto s = build("FROM vessel://minimal\nCOPY . /ctx/\n");
  ASSERT_TRUE(s.ok()) << s.error().message();
  std::vector<std::string> paths;
  for (const auto& st : s->steps) paths.push_back(st.path);
  EXPECT_THAT(paths,
              ElementsAre("/ctx", "/ctx/.dockerignore", "/ctx/deep", "/ctx/deep/x", "/ctx/deep/x/y",
                          "/ctx/keep.txt", "/ctx/logs", "/ctx/logs/keep.log"));
  auto ex = build("FROM vessel://minimal\nCOPY secret.env /x\n");
  ASSERT_FALSE(ex.ok());
  EXPECT_THAT(ex.error().message(), HasSubstr(".dockerignore excludes it"));
}

TEST_F(BuildContextTest, AddUnpacksArchivesAndCopiesOtherFiles) {
  std::string tar(512, '\0');
  tar.replace(257, 5, "ustar");
  put("rootfs.tar", tar);
  put("plain.txt", "p");
  auto s = build("FROM vessel://minimal\nADD rootfs.tar /opt/\nADD plain.txt /opt/\n");
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_THAT(shown(*s), ElementsAre("unpack /opt", "write /opt/plain.txt 644 "));
  auto c = build("FROM vessel://minimal\nCOPY rootfs.tar /opt/\n");
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(shown(*c), ElementsAre("write /opt/rootfs.tar 644 ")) << "COPY never unpacks";
}

TEST_F(BuildContextTest, RefusesWhatLeavesTheContextOrExceedsItsBounds) {
  put("a", "a");
  put("b", "b");
  fs::create_symlink("/etc/passwd", dir_ + "/link");
  fs::create_directories(dir_ + "/d");
  fs::create_symlink("/etc", dir_ + "/d/etc");
  auto why = [&](const std::string& df, ContextLimits l = {}) {
    auto s = build("FROM vessel://minimal\n" + df, l);
    return s.ok() ? std::string("built") : s.error().message();
  };
  EXPECT_THAT(why("COPY ../x /x\n"), HasSubstr("outside the build context"));
  EXPECT_THAT(why("COPY a/../../x /x\n"), HasSubstr("outside the build context"));
  EXPECT_THAT(why("COPY link /x\n"), HasSubstr("symbolic link"));
  EXPECT_THAT(why("COPY d /x\n"), HasSubstr("symbolic link"));
  EXPECT_THAT(why("COPY missing /x\n"), HasSubstr("line 2: 'missing' is not in the build context"));
  EXPECT_THAT(why("COPY *.none /x/\n"), HasSubstr("no file in the build context matches"));
  EXPECT_THAT(why("COPY a b /x\n"), HasSubstr("must be a directory ending in /"));
  EXPECT_THAT(why("COPY a /x\n", {.max_bytes = 0, .max_entries = 10}), HasSubstr("exceed"));
  EXPECT_THAT(why("COPY a b /x/\n", {.max_bytes = 1 << 20, .max_entries = 1}), HasSubstr("exceed"));
  // Absolute sources are read inside the context, as docker reads them.
  EXPECT_EQ(why("COPY /a /x\n"), "built");
  EXPECT_FALSE(BuildContext::open(dir_ + "/nothing").ok());
}

TEST(IgnoreRulesTest, LastMatchingRuleDecides) {
  auto r = IgnoreRules::parse("*.md\n!README.md\n/build\ndocs/**/draft*\n");
  EXPECT_TRUE(r.excluded("notes.md"));
  EXPECT_FALSE(r.excluded("README.md"));
  EXPECT_FALSE(r.excluded("sub/notes.md")) << "* does not cross a /";
  EXPECT_TRUE(r.excluded("build"));
  EXPECT_TRUE(r.excluded("build/out/x.o")) << "a directory's contents go with it";
  EXPECT_TRUE(r.excluded("docs/draft1"));
  EXPECT_TRUE(r.excluded("docs/a/b/draft2.txt"));
  EXPECT_FALSE(r.excluded("docs/final.txt"));
}

}  // namespace
}  // namespace vessel::templates
