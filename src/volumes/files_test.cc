// A volume's files beneath its root: on a plain directory (no root, no
// mount needed), with the links a hostile guest would leave.
#include "volumes/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace vessel::volumes {
namespace {

namespace fs = std::filesystem;

class VolumeFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/volfiles-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    top_ = tmpl;
    root_ = top_ + "/root";
    fs::create_directories(root_ + "/d/e");
    std::ofstream(top_ + "/secret") << "host secret";
    std::ofstream(root_ + "/d/f.txt") << "hello";
    // What a guest may leave: links out by absolute path and by "..".
    fs::create_symlink(top_, root_ + "/abs");
    fs::create_symlink("../..", root_ + "/d/up");
    fs::create_symlink("f.txt", root_ + "/d/rel");
  }
  void TearDown() override { fs::remove_all(top_); }
  std::string slurp(Fd fd) {
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd.get(), buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    return out;
  }
  std::string top_, root_;
};

TEST(RelativePathTest, NormalizesAndRefusesEscapes) {
  EXPECT_EQ(*relativePath(""), ".");
  EXPECT_EQ(*relativePath("/"), ".");
  EXPECT_EQ(*relativePath("/a/./b//c/"), "a/b/c");
  EXPECT_EQ(*relativePath("a/b/../c"), "a/c");
  EXPECT_EQ(relativePath("..").error().code(), Code::kInvalidArgument);
  EXPECT_EQ(relativePath("/a/../../etc").error().code(), Code::kInvalidArgument);
  EXPECT_EQ(relativePath(std::string("a\0b", 3)).error().code(), Code::kInvalidArgument);
  EXPECT_EQ(relativePath(std::string(5000, 'a')).error().code(), Code::kInvalidArgument);
}

TEST_F(VolumeFilesTest, ListsStatsAndReadsBeneathTheRoot) {
  auto v = VolumeFiles::open(root_, false);
  ASSERT_TRUE(v.ok()) << v.error().message();
  auto l = v->list("/d");
  ASSERT_TRUE(l.ok()) << l.error().message();
  ASSERT_EQ(l->size(), 4u);
  EXPECT_EQ((*l)[0].name, "e");
  EXPECT_EQ((*l)[0].type, "dir");
  EXPECT_EQ((*l)[1].name, "f.txt");
  EXPECT_EQ((*l)[1].path, "/d/f.txt");
  EXPECT_EQ((*l)[1].size, 5u);
  EXPECT_EQ((*l)[3].name, "up");
  EXPECT_EQ((*l)[3].type, "symlink");
  EXPECT_EQ((*l)[3].target, "../..");
  auto file = v->list("/d/f.txt");  // a file lists as itself
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(file->size(), 1u);
  EXPECT_EQ((*file)[0].type, "file");
  EXPECT_EQ(v->stat("/").value().type, "dir");
  EXPECT_EQ(v->stat("/nope").error().code(), Code::kNotFound);
  auto r = v->openRead("/d/rel");  // a link inside the volume is followed
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(slurp(std::move(*r)), "hello");
  EXPECT_EQ(v->openRead("/d").error().code(), Code::kInvalidArgument);
}

TEST_F(VolumeFilesTest, LinksNeverLeadOutside) {
  auto v = VolumeFiles::open(root_, false);
  ASSERT_TRUE(v.ok());
  // Reading through either link is refused; the link itself stats as one.
  EXPECT_EQ(v->openRead("/abs/secret").error().code(), Code::kInvalidArgument);
  EXPECT_EQ(v->openRead("/d/up/secret").error().code(), Code::kInvalidArgument);
  EXPECT_EQ(v->list("/abs/").value().at(0).type, "symlink");
  EXPECT_EQ(v->stat("/abs").value().type, "symlink");
  // Nor does a write, a mkdir or a remove through them.
  EXPECT_FALSE(v->write("/abs/planted", 0644).ok());
  EXPECT_FALSE(v->mkdir("/d/up/x/y", 0755, true).ok());
  EXPECT_FALSE(v->remove("/abs/secret", false).ok());
  EXPECT_TRUE(fs::exists(top_ + "/secret"));
  EXPECT_FALSE(fs::exists(top_ + "/planted"));
  EXPECT_FALSE(fs::exists(top_ + "/x"));
  // A write to a link's name replaces the link, not its target.
  auto w = v->write("/abs", 0644);
  ASSERT_TRUE(w.ok()) << w.error().message();
  ASSERT_TRUE(w->append("mine").ok());
  ASSERT_TRUE(w->commit().ok());
  EXPECT_EQ(v->stat("/abs").value().type, "file");
  EXPECT_TRUE(fs::is_directory(top_));
  // A recursive remove takes links, not what they point at.
  fs::create_symlink(top_, root_ + "/d/e/out");
  ASSERT_TRUE(v->remove("/d", true).ok());
  EXPECT_FALSE(fs::exists(root_ + "/d"));
  EXPECT_TRUE(fs::exists(top_ + "/secret"));
  EXPECT_EQ(v->remove("/", true).error().code(), Code::kInvalidArgument);
}

TEST_F(VolumeFilesTest, WritesAreAtomicAndDroppedOnesLeaveNothing) {
  auto v = VolumeFiles::open(root_, false);
  ASSERT_TRUE(v.ok());
  {
    auto w = v->write("/d/f.txt", 0600);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->append("new content").ok());
    // Until the commit, readers see the old file.
    EXPECT_EQ(slurp(*v->openRead("/d/f.txt")), "hello");
    auto info = w->commit();
    ASSERT_TRUE(info.ok()) << info.error().message();
    EXPECT_EQ(info->size, 11u);
    EXPECT_EQ(info->mode, 0600u);
  }
  EXPECT_EQ(slurp(*v->openRead("/d/f.txt")), "new content");
  {
    auto w = v->write("/d/g.txt", 0644);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->append("half").ok());
  }  // dropped: no file, no temporary
  EXPECT_EQ(v->stat("/d/g.txt").error().code(), Code::kNotFound);
  EXPECT_EQ(v->list("/d").value().size(), 4u);
  EXPECT_EQ(v->write("/d/e", 0644).error().code(), Code::kInvalidArgument);
  EXPECT_EQ(v->write("/none/x", 0644).error().code(), Code::kNotFound);
}

TEST_F(VolumeFilesTest, MkdirRemoveAndReadOnly) {
  auto v = VolumeFiles::open(root_, false);
  ASSERT_TRUE(v.ok());
  ASSERT_TRUE(v->mkdir("/a/b/c", 0750, true).ok());
  EXPECT_EQ(v->stat("/a/b/c").value().mode, 0750u);
  EXPECT_EQ(v->mkdir("/a/b/c", 0755, false).error().code(), Code::kAlreadyExists);
  EXPECT_TRUE(v->mkdir("/a/b/c", 0755, true).ok());
  EXPECT_EQ(v->mkdir("/x/y", 0755, false).error().code(), Code::kNotFound);
  EXPECT_EQ(v->remove("/a", false).error().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(v->remove("/a", true).ok());
  ASSERT_EQ(::mkfifo((root_ + "/fifo").c_str(), 0644), 0);
  EXPECT_EQ(v->openRead("/fifo").error().code(), Code::kInvalidArgument);  // and no hang
  auto ro = VolumeFiles::open(root_, true);
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ(ro->write("/n", 0644).error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(ro->mkdir("/n", 0755, false).error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(ro->remove("/d/f.txt", false).error().code(), Code::kFailedPrecondition);
  EXPECT_TRUE(fs::exists(root_ + "/d/f.txt"));
  EXPECT_TRUE(ro->stat("/d/f.txt").ok());
}

}  // namespace
}  // namespace vessel::volumes
