#include "images/image_config.h"

#include <gtest/gtest.h>

namespace vessel::images {
namespace {

const std::string kA = "sha256:" + std::string(64, 'a');
const std::string kB = "sha256:" + std::string(64, 'b');

TEST(ImageConfigTest, ReadsAnImageManifest) {
  auto m = parseManifest(R"({"schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": ")" +
                         kA +
                         R"(", "size": 470},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": ")" +
                         kB + R"(", "size": 1084039}]})");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_FALSE(m->index);
  EXPECT_EQ(m->config.digest, kA);
  ASSERT_EQ(m->layers.size(), 1u);
  EXPECT_EQ(m->totalBytes(), 470u + 1084039u);
}

TEST(ImageConfigTest, ReadsAnIndexAndChoosesThisHostsPlatform) {
  auto m = parseManifest(
      R"({"schemaVersion": 2,
    "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
    "manifests": [
      {"digest": ")" +
      kA + R"(", "size": 1, "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}},
      {"digest": ")" +
      kB + R"(", "size": 1, "platform": {"architecture": "amd64", "os": "linux"}},
      {"digest": ")" +
      kB + R"(", "size": 1, "platform": {"architecture": "unknown", "os": "unknown"}}]})");
  ASSERT_TRUE(m.ok()) << m.error().message();
  EXPECT_TRUE(m->index);
  auto p = choosePlatform(*m, "amd64");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->digest, kB);
  auto none = choosePlatform(*m, "riscv64");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code(), Code::kFailedPrecondition);
  EXPECT_NE(none.error().message().find("linux/arm64/v8, linux/amd64"), std::string::npos)
      << none.error().message();
}

TEST(ImageConfigTest, ReadsTheConfigVesselKeeps) {
  auto c = parseImageConfig(R"({"architecture": "amd64", "os": "linux", "config": {
    "Env": ["PATH=/usr/bin", "A=b=c"], "Entrypoint": ["/e"], "Cmd": ["run", "--x"],
    "WorkingDir": "/srv", "User": "app", "ExposedPorts": {"8080/tcp": {}, "53/udp": {}, "9000": {}},
    "Labels": {"x": "y"}}, "history": [{"created_by": "z"}]})");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->architecture, "amd64");
  EXPECT_EQ(c->env, (std::vector<std::string>{"PATH=/usr/bin", "A=b=c"}));
  EXPECT_EQ(c->entrypoint, std::vector<std::string>{"/e"});
  EXPECT_EQ(c->cmd, (std::vector<std::string>{"run", "--x"}));
  EXPECT_EQ(c->working_dir, "/srv");
  EXPECT_EQ(c->user, "app");
  EXPECT_EQ(c->exposed_ports, (std::vector<std::string>{"53/udp", "8080/tcp", "9000/tcp"}));
  // No config at all, or nulls (docker writes "Cmd": null): no defaults.
  auto bare = parseImageConfig(R"({"architecture": "amd64", "os": "linux"})");
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->env.empty());
  auto nulls = parseImageConfig(
      R"({"architecture": "amd64", "os": "linux", "config": {"Cmd": null, "Env": null}})");
  ASSERT_TRUE(nulls.ok()) << nulls.error().message();
}

TEST(ImageConfigTest, RefusesWhatIsNotAManifestOrAConfig) {
  const std::string cfg = R"(, "size": 1})";
  for (const std::string& bad :
       {std::string(""), std::string("[]"), std::string(R"({"schemaVersion": 1})"),
        std::string(R"({"schemaVersion": 2})"),
        std::string(
            R"({"schemaVersion": 2, "config": {"digest": "sha256:zz", "size": 1}, "layers": []})"),
        std::string(R"({"schemaVersion": 2, "config": {"digest": ")" + kA + R"("}, "layers": []})"),
        std::string(R"({"schemaVersion": 2, "config": {"digest": ")" + kA +
                    R"(", "size": -1}, "layers": []})"),
        std::string(R"({"schemaVersion": 2, "config": {"digest": ")" + kA + cfg +
                    R"(, "layers": {}})"),
        std::string(R"({"schemaVersion": 2, "manifests": [1]})"),
        std::string(kMaxManifestBytes + 1, ' ')})
    EXPECT_FALSE(parseManifest(bad).ok()) << bad.substr(0, 200);
  for (const std::string& bad :
       {std::string("{}"), std::string(R"({"architecture": 3})"),
        std::string(R"({"architecture": "amd64", "config": []})"),
        std::string(R"({"architecture": "amd64", "config": {"Env": ["NOEQUALS"]}})"),
        std::string(R"({"architecture": "amd64", "config": {"Env": ["A=b\u0000c"]}})"),
        std::string(R"({"architecture": "amd64", "config": {"Env": [1]}})"),
        std::string(R"({"architecture": "amd64", "config": {"Cmd": "sh"}})"),
        std::string(R"({"architecture": "amd64", "config": {"WorkingDir": "rel"}})"),
        std::string(R"({"architecture": "amd64", "config": {"ExposedPorts": {"99999/tcp": {}}}})"),
        std::string(R"({"architecture": "amd64", "config": {"ExposedPorts": {"80/icmp": {}}}})"),
        std::string(R"({"architecture": "amd64", "config": {"ExposedPorts": {"x/tcp": {}}}})"),
        std::string(R"({"architecture": "amd64", "config": {"User": ")" + std::string(65, 'u') +
                    R"("}})"),
        std::string(256, '[') + std::string(256, ']'), std::string(kMaxConfigBytes + 1, ' ')})
    EXPECT_FALSE(parseImageConfig(bad).ok()) << bad.substr(0, 200);
}

TEST(ImageConfigTest, HostArchitectureIsAnOciName) {
  std::string a = hostArchitecture();
#if defined(__x86_64__)
  EXPECT_EQ(a, "amd64");
#elif defined(__aarch64__)
  EXPECT_EQ(a, "arm64");
#endif
}

}  // namespace
}  // namespace vessel::images
