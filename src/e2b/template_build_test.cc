// E2B's template builder bodies (what the `e2b` 2.51 SDK's Template sends)
// -> typed builds -> Vessel build specs, and the COPY script run on the
// host's /bin/sh against a real directory tree.
#include "e2b/template_build.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace vessel::e2b {
namespace {

namespace fs = std::filesystem;
using templates::BuildStep;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kHash(64, 'a');

// Template().fromImage('127.0.0.1:5000/e2b/busybox:1').copy('app', '/app')
//   .runCmd('echo hi').setEnvs({GREETING: 'hello'}).setWorkdir('/app')
//   .setUser('root').setStartCmd('httpd -p 8000', waitForPort(8000)),
// as the SDK's serialize() sends it.
std::string sdkBody() {
  return R"({"startCmd":"httpd -p 8000","readyCmd":"[ -n \"$(ss -Htuln sport = :8000)\" ]",
    "force":false,"fromImage":"127.0.0.1:5000/e2b/busybox:1","steps":[
    {"type":"COPY","args":["app","/app","",""],"force":false,"filesHash":")" +
         kHash + R"("},
    {"type":"RUN","args":["echo hi"],"force":false},
    {"type":"ENV","args":["GREETING","hello"],"force":false},
    {"type":"WORKDIR","args":["/app"],"force":false},
    {"type":"USER","args":["root"],"force":false},
    {"type":"RUN","args":["echo $GREETING > greeting","user"],"force":true}]})";
}

TEST(TemplateBuild, TheSdksBodyBecomesTypedSteps) {
  auto b = parseTemplateBuild(sdkBody());
  ASSERT_TRUE(b.ok()) << b.error().message();
  EXPECT_EQ(b->from_image, "127.0.0.1:5000/e2b/busybox:1");
  EXPECT_EQ(b->start_cmd, "httpd -p 8000");
  ASSERT_EQ(b->steps.size(), 6u);
  EXPECT_EQ(b->steps[0].kind, TemplateStep::Kind::kCopy);
  EXPECT_EQ(b->steps[0].files_hash, kHash);
  EXPECT_THAT(b->steps[5].args, ElementsAre("echo $GREETING > greeting", "user"));
  EXPECT_FALSE(b->force);
  EXPECT_FALSE(b->steps[4].force);
  EXPECT_TRUE(b->steps[5].force) << "a step's force is kept";
  // docker.io's short names are made canonical, as Vessel's own API does.
  auto d = parseTemplateBuild(R"({"fromImage":"python:3.12"})");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->from_image, "docker.io/library/python:3.12");
  auto t = parseTemplateBuild(R"({"fromTemplate":"base","steps":[]})");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->from_template, "base");
}

TEST(TemplateBuild, WhatHasNoMappingIsRefusedByName) {
  auto aws = parseTemplateBuild(
      R"({"fromImage":"x/y:1","fromImageRegistry":{"type":"aws","awsAccessKeyId":"a",
          "awsSecretAccessKey":"b","awsRegion":"c"}})");
  ASSERT_FALSE(aws.ok());
  EXPECT_EQ(aws.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(aws.error().message(), HasSubstr("'aws' is not supported"));
  EXPECT_THAT(aws.error().message(), HasSubstr("type 'registry'"));
  auto gcp = parseTemplateBuild(
      R"({"fromImage":"x/y:1","fromImageRegistry":{"type":"gcp","serviceAccountJson":"{}"}})");
  ASSERT_FALSE(gcp.ok());
  EXPECT_THAT(gcp.error().message(), HasSubstr("'gcp' is not supported"));
  auto reg = parseTemplateBuild(
      R"({"fromImage":"x/y:1","fromImageRegistry":{"type":"registry","username":"u","password":"p"}})");
  ASSERT_TRUE(reg.ok()) << reg.error().message();
  EXPECT_TRUE(reg->registry_credentials);
  EXPECT_EQ(reg->registry_auth.username, "u");
  EXPECT_EQ(reg->registry_auth.password, "p");
  EXPECT_THAT(parseTemplateBuild(R"({"fromImage":"x","steps":[{"type":"ADD","args":["a"]}]})")
                  .error()
                  .message(),
              HasSubstr("COPY, ENV, RUN, WORKDIR and USER"));
  EXPECT_FALSE(parseTemplateBuild(R"({"fromImage":"x","fromTemplate":"base"})").ok());
  EXPECT_FALSE(parseTemplateBuild(R"({"steps":[]})").ok());
  EXPECT_FALSE(
      parseTemplateBuild(R"({"fromImage":"x","steps":[{"type":"COPY","args":["a","/b"]}]})")
          .ok());  // no filesHash
  EXPECT_FALSE(
      parseTemplateBuild(R"({"fromImage":"x","steps":[{"type":"ENV","args":["1A","x"]}]})").ok());
  EXPECT_FALSE(parseTemplateBuild(R"({"fromImage":"NOT A REF"})").ok());
}

TEST(TemplateBuild, BuildRequestsAndTags) {
  auto r =
      parseBuildRequest(R"({"name":"my-app:v1","tags":["stable"],"cpuCount":2,"memoryMB":512})");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->name, "my-app");
  EXPECT_THAT(r->tags, ElementsAre("v1", "stable"));
  EXPECT_EQ(r->cpu_count, 2u);
  EXPECT_EQ(r->memory_mib, 512u);
  EXPECT_FALSE(parseBuildRequest(R"({"name":"a.b"})").ok());  // not a Vessel template name
  EXPECT_FALSE(parseBuildRequest(R"({"tags":["x"]})").ok());
  EXPECT_FALSE(parseBuildRequest(R"({"name":"a","cpuCount":0})").ok());
  auto t = parseTagsRequest(R"({"target":"my-app:v1","tags":["prod"]})", true);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->name, "my-app");
  EXPECT_EQ(t->tag, "v1");
  auto d = parseTagsRequest(R"({"name":"my-app","tags":["prod"]})", false);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->tag, "default");
  EXPECT_FALSE(parseTagsRequest(R"({"target":"my-app","tags":[]})", true).ok());
}

TEST(TemplateBuild, StepsBecomeTheSpecsStepsWithTheirUserWorkdirAndEnv) {
  auto b = parseTemplateBuild(sdkBody());
  ASSERT_TRUE(b.ok());
  BuildRequest r;
  r.name = "my-app";
  r.cpu_count = 2;
  std::string archive = "tar bytes";
  auto spec = toBuildSpec(*b, r, [&](const std::string& h) -> const std::string* {
    return h == kHash ? &archive : nullptr;
  });
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  EXPECT_EQ(spec->name, "my-app");
  EXPECT_EQ(spec->vcpus, 2u);
  EXPECT_EQ(spec->from_image, "127.0.0.1:5000/e2b/busybox:1");
  ASSERT_EQ(spec->steps.size(), 5u);  // write the archive, unpack and copy, run, mkdir, run
  EXPECT_EQ(spec->steps[0].kind, BuildStep::Kind::kWrite);
  EXPECT_EQ(spec->steps[0].content, "tar bytes");
  EXPECT_THAT(spec->steps[1].argv[2], HasSubstr("tar -xf '/tmp/.e2b-copy-0.tar'"));  // not gzip
  EXPECT_EQ(spec->steps[1].user, "root");
  EXPECT_THAT(spec->steps[1].argv[2], HasSubstr("chown -R 'user'"));  // COPY as the current USER
  EXPECT_EQ(spec->steps[2].user, "user");                             // E2B's default user
  EXPECT_TRUE(spec->steps[2].env.empty());
  EXPECT_EQ(spec->steps[3].kind, BuildStep::Kind::kMkdir);
  EXPECT_EQ(spec->steps[3].path, "/app");
  EXPECT_EQ(spec->steps[4].user, "user");  // the RUN's own user wins over USER root
  EXPECT_EQ(spec->steps[4].workdir, "/app");
  EXPECT_THAT(spec->steps[4].env, ElementsAre("GREETING=hello"));
  EXPECT_THAT(spec->env, ElementsAre("GREETING=hello"));
  EXPECT_EQ(spec->start, "httpd -p 8000");
  EXPECT_EQ(spec->start_user, "root");
  EXPECT_EQ(spec->start_cwd, "/app");
  EXPECT_THAT(spec->ready, HasSubstr("sport = :8000"));
  // An archive that was never uploaded fails the build before it starts.
  auto none = toBuildSpec(*b, r, [](const std::string&) -> const std::string* { return nullptr; });
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), Code::kFailedPrecondition);
  EXPECT_THAT(none.error().message(), HasSubstr("were not uploaded"));
}

// The COPY step's script on the host's shell: docker's rules for a
// directory, a file into a directory, a file renamed and a pattern.
TEST(TemplateBuild, TheCopyScriptCopiesAsDockerDoes) {
  fs::path root = fs::temp_directory_path() / ("e2b-copy-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "src/app/sub");
  std::ofstream(root / "src/app/a.txt") << "a";
  std::ofstream(root / "src/app/sub/b.txt") << "b";
  std::ofstream(root / "src/one.txt") << "1";
  std::ofstream(root / "src/x.cfg") << "x";
  std::ofstream(root / "src/y.cfg") << "y";
  // The SDK's archive: a tar.gz of the paths, relative to the context.
  std::string tgz = (root / "context.tar.gz").string();
  ASSERT_EQ(std::system(
                ("tar -czf " + tgz + " -C " + (root / "src").string() + " app one.txt x.cfg y.cfg")
                    .c_str()),
            0);
  std::ifstream in(tgz, std::ios::binary);
  std::string archive((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto copy = [&](const std::string& src, const std::string& dest) {
    auto b = parseTemplateBuild(R"({"fromImage":"x","steps":[{"type":"USER","args":["root"]},
        {"type":"COPY","args":[")" +
                                src + R"(",")" + dest + R"(","","0750"],"filesHash":")" + kHash +
                                R"("}]})");
    EXPECT_TRUE(b.ok());
    if (!b.ok()) return -1;
    auto spec =
        toBuildSpec(*b, BuildRequest{"t", {}, 0, 0}, [&](const std::string&) { return &archive; });
    EXPECT_TRUE(spec.ok());
    if (!spec.ok() || spec->steps.size() != 2) return -1;
    // The guest's paths become the host's scratch paths here.
    std::string script = spec->steps[1].argv[2];
    const std::string guest = "/tmp/.e2b-copy-1";
    for (size_t at; (at = script.find(guest)) != std::string::npos;)
      script.replace(at, guest.size(), (root / "scratch").string());
    std::ofstream(root / "scratch.tar", std::ios::binary) << spec->steps[0].content;
    std::ofstream(root / "copy.sh") << script;
    int st = std::system(("/bin/sh " + (root / "copy.sh").string() + " 2>/dev/null").c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  std::string out = (root / "out").string();
  EXPECT_EQ(copy("app", out + "/app"), 0);
  EXPECT_TRUE(fs::exists(root / "out/app/a.txt"));
  EXPECT_TRUE(fs::exists(root / "out/app/sub/b.txt"));
  EXPECT_EQ(copy("one.txt", out + "/dir/"), 0);
  EXPECT_TRUE(fs::is_regular_file(root / "out/dir/one.txt"));
  EXPECT_EQ(fs::status(root / "out/dir/one.txt").permissions() & fs::perms::all, fs::perms(0750));
  EXPECT_EQ(copy("one.txt", out + "/renamed.txt"), 0);
  EXPECT_TRUE(fs::is_regular_file(root / "out/renamed.txt"));
  EXPECT_EQ(copy("*.cfg", out + "/cfg"), 0);
  EXPECT_TRUE(fs::exists(root / "out/cfg/x.cfg"));
  EXPECT_TRUE(fs::exists(root / "out/cfg/y.cfg"));
  EXPECT_FALSE(fs::exists(root / "scratch"));  // both removed by the script after a copy
  EXPECT_FALSE(fs::exists(root / "scratch.tar"));
  EXPECT_NE(copy("missing.txt", out + "/m"), 0);
  fs::remove_all(root);
}

}  // namespace
}  // namespace vessel::e2b
