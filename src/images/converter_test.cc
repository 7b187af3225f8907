// The converter against a real registry (docker-registry on 127.0.0.1),
// real skopeo, umoci and mkfs.ext4: what a node does for a from_image
// build, without the guest (tests/integration/image_template_test.cc
// boots the result).
#include "images/converter.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "images/testing/registry.h"
#include "os/command.h"

namespace vessel::images {
namespace {

namespace fs = std::filesystem;
using testing::ImageSpec;
using testing::TestRegistry;

// A file inside an ext4 image (debugfs reads it; nothing is mounted).
std::string catInImage(const std::string& image, const std::string& path) {
  auto r = os::runCommand({"debugfs", "-R", "cat " + path, image});
  return r.ok() ? r->out : "";
}

class ConverterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (::geteuid() != 0) return;  // umoci unpacks ownership as root only
    auto r = TestRegistry::start();
    ASSERT_TRUE(r.ok()) << r.error().message();
    reg_ = r->release();
    root_ = reg_->dir() + "/busybox-root";
    ASSERT_TRUE(testing::makeBusyboxRoot(root_).ok());
    ImageSpec spec;
    spec.env = {"PATH=/usr/bin:/bin", "GREETING=hello from the image"};
    spec.working_dir = "/srv";
    spec.cmd = {"/bin/sh", "-c", "echo started"};
    spec.exposed_ports = {"8080/tcp"};
    auto d = reg_->push(root_, "test/busybox", "1", spec);
    ASSERT_TRUE(d.ok()) << d.error().message();
    digest_ = *d;
  }
  static void TearDownTestSuite() {
    delete reg_;
    reg_ = nullptr;
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (umoci unpacks as root)";
    ASSERT_NE(reg_, nullptr);
    cache_ =
        reg_->dir() + "/cache-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    o_.cache_dir = cache_;
    o_.agent_binary = VESSEL_AGENT_BINARY;
  }
  templates::ImageRef ref(const std::string& s) {
    auto r = templates::parseImageRef(s);
    EXPECT_TRUE(r.ok()) << s;
    return *r;
  }
  static TestRegistry* reg_;
  static std::string root_, digest_;
  std::string cache_;
  ConverterOptions o_;
};
TestRegistry* ConverterTest::reg_ = nullptr;
std::string ConverterTest::root_, ConverterTest::digest_;

TEST_F(ConverterTest, ConvertsAnImageAndCachesItByDigest) {
  auto layers = reg_->layers("test/busybox", "1");
  ASSERT_TRUE(layers.ok() && layers->size() == 1);
  auto c = convertImage(o_, ref(reg_->host() + "/test/busybox:1"));
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_FALSE(c->cached);
  EXPECT_EQ(c->digest, digest_);
  EXPECT_EQ(c->config.working_dir, "/srv");
  EXPECT_EQ(c->config.env[1], "GREETING=hello from the image");
  EXPECT_EQ(c->config.cmd, (std::vector<std::string>{"/bin/sh", "-c", "echo started"}));
  EXPECT_EQ(c->config.exposed_ports, std::vector<std::string>{"8080/tcp"});
  EXPECT_EQ(catInImage(c->rootfs, "/etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n");
  auto agent = readFile(VESSEL_AGENT_BINARY, 64 << 20);
  ASSERT_TRUE(agent.ok());
  EXPECT_EQ(catInImage(c->rootfs, "/sbin/vessel-agent"), *agent);
  EXPECT_EQ(reg_->blobFetches("test/busybox", (*layers)[0]), 1u);

  // Again by tag: the registry is asked for the manifest only.
  auto again = convertImage(o_, ref(reg_->host() + "/test/busybox:1"));
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_TRUE(again->cached);
  EXPECT_EQ(again->rootfs, c->rootfs);
  EXPECT_EQ(again->config.working_dir, "/srv");
  EXPECT_EQ(reg_->blobFetches("test/busybox", (*layers)[0]), 1u);
}

TEST_F(ConverterTest, ADigestReferenceHitsTheCacheWithoutTheRegistry) {
  auto other = TestRegistry::start();
  ASSERT_TRUE(other.ok()) << other.error().message();
  std::string host = (*other)->host();
  auto digest = (*other)->push(root_, "test/own", "1");
  ASSERT_TRUE(digest.ok()) << digest.error().message();
  auto first = convertImage(o_, ref(host + "/test/own@" + *digest));
  ASSERT_TRUE(first.ok()) << first.error().message();
  ASSERT_FALSE(first->cached);
  (*other)->stop();
  // A tag must be asked of the registry, which is gone: its error says so.
  auto down = convertImage(o_, ref(host + "/test/own:1"));
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.error().code(), Code::kUnavailable) << down.error().message();
  EXPECT_NE(down.error().message().find("connection refused"), std::string::npos)
      << down.error().message();
  // A digest names its image for good: the base comes from the cache.
  auto by_digest = convertImage(o_, ref(host + "/test/own@" + *digest));
  ASSERT_TRUE(by_digest.ok()) << by_digest.error().message();
  EXPECT_TRUE(by_digest->cached);
  EXPECT_EQ(by_digest->rootfs, first->rootfs);
}

TEST_F(ConverterTest, RefusesAnotherArchitecture) {
  ImageSpec arm;
  arm.architecture = "arm64";
  ASSERT_TRUE(reg_->push(root_, "test/arm", "1", arm).ok());
  auto c = convertImage(o_, ref(reg_->host() + "/test/arm:1"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Code::kFailedPrecondition);
  EXPECT_NE(c.error().message().find("linux/arm64, not linux/amd64"), std::string::npos)
      << c.error().message();
  auto layers = reg_->layers("test/arm", "1");
  ASSERT_TRUE(layers.ok());
  EXPECT_EQ(reg_->blobFetches("test/arm", (*layers)[0]), 0u) << "refused before the pull";
}

TEST_F(ConverterTest, RefusesAnImageLargerThanTheLimit) {
  o_.max_image_mib = 0;
  auto c = convertImage(o_, ref(reg_->host() + "/test/busybox:1"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Code::kResourceExhausted);
  EXPECT_NE(c.error().message().find("--max-image-mib"), std::string::npos);
}

TEST_F(ConverterTest, RefusesABlobWhoseDigestDiffers) {
  ASSERT_TRUE(reg_->push(root_, "test/corrupt", "1").ok());
  auto layers = reg_->layers("test/corrupt", "1");
  ASSERT_TRUE(layers.ok() && !layers->empty());
  // Blobs are shared by digest in the registry's store: corrupt a copy of
  // the layer under its own digest by pushing distinct content first.
  std::string blob = reg_->blobPath((*layers)[0]);
  auto bytes = readFile(blob, 64 << 20);
  ASSERT_TRUE(bytes.ok());
  std::string bad = *bytes;
  bad[bad.size() / 2] ^= 0x5a;
  ASSERT_TRUE(writeFileAtomic(blob, bad).ok());
  auto c = convertImage(o_, ref(reg_->host() + "/test/corrupt:1"));
  // Put it back for the other tests (the blob is shared with test/busybox).
  ASSERT_TRUE(writeFileAtomic(blob, *bytes).ok());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), Code::kProtocol) << c.error().message();
  EXPECT_NE(c.error().message().find("does not match its digest"), std::string::npos)
      << c.error().message();
  EXPECT_FALSE(fs::exists(cache_) && !fs::is_empty(cache_)) << "nothing half-made is cached";
}

TEST_F(ConverterTest, RefusesUnknownImagesAndUnreachableRegistries) {
  auto missing = convertImage(o_, ref(reg_->host() + "/test/nothing:1"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), Code::kNotFound) << missing.error().message();
  auto unreachable = convertImage(o_, ref("127.0.0.1:1/test/busybox:1"));
  ASSERT_FALSE(unreachable.ok());
  EXPECT_EQ(unreachable.error().code(), Code::kUnavailable);
  EXPECT_NE(unreachable.error().message().find("cannot be reached"), std::string::npos);
  EXPECT_NE(unreachable.error().message().find("127.0.0.1:1"), std::string::npos);
}

// The image's symlinks point into the image, never at the host's files:
// /sbin -> an absolute host path still puts the agent inside the image.
TEST_F(ConverterTest, TheImagesSymlinksStayInTheImage) {
  std::string hostile = reg_->dir() + "/hostile-root";
  ASSERT_TRUE(testing::makeBusyboxRoot(hostile).ok());
  std::string host_dir = reg_->dir() + "/host-side";
  fs::create_directories(host_dir);
  fs::remove_all(hostile + "/sbin");
  fs::create_symlink(host_dir, hostile + "/sbin");
  fs::create_directories(hostile + host_dir);  // the link's target, inside the image
  ASSERT_TRUE(reg_->push(hostile, "test/hostile", "1").ok());
  auto c = convertImage(o_, ref(reg_->host() + "/test/hostile:1"));
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_FALSE(fs::exists(host_dir + "/vessel-agent")) << "the agent was written on the host";
  auto agent = readFile(VESSEL_AGENT_BINARY, 64 << 20);
  EXPECT_EQ(catInImage(c->rootfs, host_dir + "/vessel-agent"), *agent);
  // A /sbin that leads nowhere in the image is refused, not followed.
  std::string dangling = reg_->dir() + "/dangling-root";
  ASSERT_TRUE(testing::makeBusyboxRoot(dangling).ok());
  fs::remove_all(dangling + "/sbin");
  fs::create_symlink(host_dir, dangling + "/sbin");
  ASSERT_TRUE(reg_->push(dangling, "test/dangling", "1").ok());
  auto d = convertImage(o_, ref(reg_->host() + "/test/dangling:1"));
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message().find("/sbin"), std::string::npos) << d.error().message();
  EXPECT_FALSE(fs::exists(host_dir + "/vessel-agent"));
}

}  // namespace
}  // namespace vessel::images
