#include "templates/image_ref.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "base/base64.h"

namespace vessel::templates {
namespace {

const std::string kDigest = "sha256:" + std::string(64, 'a');

TEST(ImageRefTest, ShortNamesResolveAsDockerDoes) {
  auto r = parseImageRef("ubuntu:22.04");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->registry, "docker.io");
  EXPECT_EQ(r->repository, "library/ubuntu");
  EXPECT_EQ(r->tag, "22.04");
  EXPECT_EQ(r->canonical(), "docker.io/library/ubuntu:22.04");
  EXPECT_EQ(parseImageRef("busybox")->canonical(), "docker.io/library/busybox:latest");
  EXPECT_EQ(parseImageRef("bitnami/redis")->canonical(), "docker.io/bitnami/redis:latest");
  EXPECT_EQ(parseImageRef("docker://index.docker.io/library/debian:12")->canonical(),
            "docker.io/library/debian:12");
  EXPECT_FALSE(parseImageRef("ubuntu")->loopback());
}

TEST(ImageRefTest, RegistriesPortsAndDigests) {
  auto r = parseImageRef("127.0.0.1:5000/test/busybox:1.36");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->registry, "127.0.0.1:5000");
  EXPECT_EQ(r->repository, "test/busybox");
  EXPECT_EQ(r->tag, "1.36");
  EXPECT_TRUE(r->loopback());
  EXPECT_EQ(r->pinned(kDigest), "127.0.0.1:5000/test/busybox@" + kDigest);
  auto d = parseImageRef("ghcr.io/org/app@" + kDigest);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->tag, "");
  EXPECT_EQ(d->digest, kDigest);
  EXPECT_FALSE(d->loopback());
  EXPECT_EQ(parseImageRef("localhost/app")->registry, "localhost");
  EXPECT_TRUE(parseImageRef("localhost:5000/app")->loopback());
  EXPECT_TRUE(parseImageRef("[::1]:5000/app")->loopback());
  EXPECT_FALSE(parseImageRef("127.example.com/app")->loopback());
  // Both tag and digest: docker keeps both, the digest decides.
  EXPECT_EQ(parseImageRef("app:1@" + kDigest)->canonical(), "docker.io/library/app:1@" + kDigest);
  // A canonical form reads back as itself.
  for (const char* s : {"ubuntu:22.04", "127.0.0.1:5000/a/b", "quay.io/x/y_z.w-v:t_1"}) {
    auto c = parseImageRef(s)->canonical();
    EXPECT_EQ(parseImageRef(c)->canonical(), c) << s;
  }
}

TEST(ImageRefTest, RefusesBadReferences) {
  for (std::string bad :
       {std::string(""), std::string("docker://"), std::string("Ubuntu"), std::string("-rm"),
        std::string("--src-creds=x:y"), std::string("ubuntu:"), std::string("ubuntu:-x"),
        std::string("ubuntu@sha256:abc"), std::string("ubuntu@md5:" + std::string(32, 'a')),
        std::string("a//b"), std::string("a/b/"), std::string("/a"), std::string("a b"),
        std::string("a..b"), std::string("host:99999999/a"), std::string("ex ample.com/a"),
        std::string("a\nb"), std::string("-host.com/a"),
        std::string("ubuntu:" + std::string(129, 't')), std::string("[]:5000/a"),
        std::string(kMaxImageRefLength + 1, 'a'),
        // Short enough as typed, too long once completed:
        // the stored form would not parse again.
        std::string(kMaxImageRefLength, 'a')}) {
    auto r = parseImageRef(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().code(), Code::kInvalidArgument) << bad;
      EXPECT_NE(r.error().message().find("image reference"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace vessel::templates

namespace vessel::templates {
namespace {

TEST(RegistryAuthTest, ABasicCredentialGivesItsUserAndPassword) {
  auto a = registryAuthFromCredential("Authorization", "Basic " + base64Encode("alice:s3:cret"));
  ASSERT_TRUE(a.ok()) << a.error().message();
  EXPECT_EQ(a->username, "alice");
  EXPECT_EQ(a->password, "s3:cret") << "only the first colon separates";
  EXPECT_TRUE(registryAuthFromCredential("authorization", "basic " + base64Encode("u:p")).ok());
  for (auto [header, value] : std::vector<std::pair<std::string, std::string>>{
           {"X-Token", "Basic " + base64Encode("u:p")},
           {"Authorization", "Bearer abcdefghijklmnopq"},
           {"Authorization", "Basic !!!notbase64"},
           {"Authorization", "Basic " + base64Encode("nocolon")},
           {"Authorization", "Basic " + base64Encode(":nouser")},
           {"Authorization", "Basic " + base64Encode("u:p\nq")},
       }) {
    auto r = registryAuthFromCredential(header, value);
    ASSERT_FALSE(r.ok()) << header << ": " << value;
    EXPECT_EQ(r.error().code(), Code::kInvalidArgument);
    EXPECT_EQ(r.error().message().find("cret"), std::string::npos);
  }
}

TEST(RegistryAuthTest, ACredentialNamesTheRegistryWithoutItsPort) {
  EXPECT_EQ(registryHost(*parseImageRef("registry.lan:5000/app:1")), "registry.lan");
  EXPECT_EQ(registryHost(*parseImageRef("ghcr.io/org/app")), "ghcr.io");
  EXPECT_EQ(registryHost(*parseImageRef("ubuntu:22.04")), "docker.io");
  EXPECT_EQ(registryHost(*parseImageRef("localhost:5000/a")), "localhost");
}

}  // namespace
}  // namespace vessel::templates
