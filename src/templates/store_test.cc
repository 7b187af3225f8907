#include "templates/store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/sha256.h"

namespace vessel::templates {
namespace {

namespace fs = std::filesystem;

class TemplateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/tstore-" + std::to_string(::getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  // A staged template with small fake files; returns its manifest.
  Manifest stage(const std::string& staging, const std::string& version, const std::string& at) {
    fs::create_directories(staging);
    Manifest m;
    m.name = "t";
    m.version = version;
    m.spec_hash = std::string(64, 'a');
    m.qemu_version = "qemu-x";
    m.kernel_sha256 = std::string(64, 'k');
    m.created_at = at;
    for (const char* f : {kRootfsFile, kMemoryFile, kStateFile}) {
      std::string data = std::string(f) + version;
      std::ofstream(staging + "/" + f) << data;
      m.files[f] = sha256Hex(data);
    }
    return m;
  }
  std::string root_;
};

TEST_F(TemplateStoreTest, InstallOpenLatestAndCorruption) {
  TemplateStore s(root_, "qemu-x", std::string(64, 'k'));
  ASSERT_TRUE(s.install(root_ + "/s1", stage(root_ + "/s1", "v1", "2026-01-01")).ok());
  ASSERT_TRUE(s.install(root_ + "/s2", stage(root_ + "/s2", "v2", "2026-02-01")).ok());
  auto latest = s.open("t");
  ASSERT_TRUE(latest.ok()) << latest.error().message();
  EXPECT_EQ((*latest)->manifest.version, "v2");
  EXPECT_EQ(s.list().size(), 2u);
  // Corrupt the memory file: refused, naming the file.
  {
    std::ofstream f((*latest)->path(kMemoryFile), std::ios::app);
    f << "x";
  }
  auto bad = s.open("t", "v2");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), Code::kFailedPrecondition);
  EXPECT_NE(bad.error().message().find("corrupt"), std::string::npos);
  EXPECT_EQ(s.open("nope").error().code(), Code::kNotFound);
  EXPECT_FALSE(s.open("../x").ok());
}

// Checksums computed elsewhere (a build worker's store, a fork's hashing
// thread) are taken for files whose stamps match, so the io thread does not
// hash them again; a file changed since is hashed again.
TEST_F(TemplateStoreTest, ChecksumsHandedOverAreUsedWhileTheFilesAreUnchanged) {
  TemplateStore worker(root_, "qemu-x", std::string(64, 'k'));
  auto t = worker.install(root_ + "/s1", stage(root_ + "/s1", "v1", "2026-01-01"));
  ASSERT_TRUE(t.ok()) << t.error().message();
  auto hashed = worker.hashedFiles(**t);
  ASSERT_EQ(hashed.size(), 3u);
  // Noted with a wrong sum for the memory file: the store believes the
  // note (it did not hash the file) and refuses the template.
  TemplateStore io(root_, "qemu-x", std::string(64, 'k'));
  auto noted = hashed;
  noted[(*t)->path(kMemoryFile)].sha256 = std::string(64, '0');
  io.noteHashed(noted);
  auto bad = io.open("t", "v1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("corrupt"), std::string::npos);
  // The right sums: opened.
  io.noteHashed(hashed);
  EXPECT_TRUE(io.open("t", "v1").ok());
  // A file changed since it was hashed does not match its stamp: hashed
  // again, and caught.
  std::ofstream((*t)->path(kRootfsFile), std::ios::app) << "x";
  auto changed = io.open("t", "v1");
  ASSERT_FALSE(changed.ok());
  EXPECT_NE(changed.error().message().find(kRootfsFile), std::string::npos);
}

TEST_F(TemplateStoreTest, MismatchedHostIsRefused) {
  {
    TemplateStore s(root_, "qemu-x", std::string(64, 'k'));
    ASSERT_TRUE(s.install(root_ + "/s1", stage(root_ + "/s1", "v1", "2026-01-01")).ok());
  }
  TemplateStore other_qemu(root_, "qemu-y", std::string(64, 'k'));
  auto r = other_qemu.open("t");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("rebuild"), std::string::npos);
  TemplateStore other_kernel(root_, "qemu-x", std::string(64, 'z'));
  EXPECT_FALSE(other_kernel.open("t").ok());
}

TEST_F(TemplateStoreTest, InUseCannotBeRemovedAndGcKeepsNewest) {
  TemplateStore s(root_, "qemu-x", std::string(64, 'k'));
  ASSERT_TRUE(s.install(root_ + "/s1", stage(root_ + "/s1", "v1", "2026-01-01")).ok());
  ASSERT_TRUE(s.install(root_ + "/s2", stage(root_ + "/s2", "v2", "2026-02-01")).ok());
  ASSERT_TRUE(s.install(root_ + "/s3", stage(root_ + "/s3", "v3", "2026-03-01")).ok());
  s.acquire("t@v1");
  EXPECT_EQ(s.collectGarbage(), 1);  // v2 only: v1 in use, v3 newest
  EXPECT_FALSE(s.open("t", "v2").ok());
  s.release("t@v1");
  EXPECT_EQ(s.collectGarbage(), 1);
  EXPECT_TRUE(s.open("t", "v3").ok());
  EXPECT_EQ(s.list().size(), 1u);
}

// Deleting a version its sandboxes still use retires it: new sandboxes
// cannot find it, its own sandboxes still can, and its files go with the
// last of them (or at the next collection, after a restart).
TEST_F(TemplateStoreTest, ADeletedVersionInUseIsRetiredUntilItsLastSandboxEnds) {
  TemplateStore s(root_, "qemu-x", std::string(64, 'k'));
  ASSERT_TRUE(s.install(root_ + "/s1", stage(root_ + "/s1", "v1", "2026-01-01")).ok());
  ASSERT_TRUE(s.install(root_ + "/s2", stage(root_ + "/s2", "v2", "2026-02-01")).ok());
  s.acquire("t@v2");
  s.acquire("t@v2");
  ASSERT_TRUE(s.remove("t", "v2").ok());
  EXPECT_TRUE(s.retired("t", "v2"));
  EXPECT_FALSE(s.retired("t", "v1"));
  EXPECT_TRUE(s.open("t", "v2").ok()) << "its sandboxes resume and fork from it";
  auto newest = s.open("t");
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ((*newest)->manifest.version, "v1") << "a create by name skips it";
  ASSERT_EQ(s.list().size(), 1u);
  EXPECT_EQ(s.list()[0].version, "v1");
  ASSERT_TRUE(s.remove("t", "v1").ok());  // not in use: gone at once
  EXPECT_FALSE(fs::exists(root_ + "/t/v1"));
  EXPECT_FALSE(s.has("t")) << "only a retired version is left";
  EXPECT_EQ(s.open("t").error().code(), Code::kNotFound);
  EXPECT_EQ(s.collectGarbage(), 0) << "still in use";
  s.release("t@v2");
  EXPECT_TRUE(fs::exists(root_ + "/t/v2"));
  s.release("t@v2");  // the last one
  EXPECT_FALSE(fs::exists(root_ + "/t/v2"));
  EXPECT_EQ(s.remove("t", "v2").error().code(), Code::kNotFound);

  // A restarted vesseld holds nothing until its sandboxes are adopted: a
  // retired version nobody took up is collected.
  ASSERT_TRUE(s.install(root_ + "/s3", stage(root_ + "/s3", "v3", "2026-03-01")).ok());
  s.acquire("t@v3");
  ASSERT_TRUE(s.remove("t", "v3").ok());
  TemplateStore after(root_, "qemu-x", std::string(64, 'k'));
  EXPECT_EQ(after.collectGarbage(), 1);
  EXPECT_FALSE(fs::exists(root_ + "/t/v3"));
}

}  // namespace
}  // namespace vessel::templates
