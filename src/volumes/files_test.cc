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

TEST_F(VolumeFilesTest, ListsToADepthWithoutFollowingLinks) {
  auto v = VolumeFiles::open(root_, false);
  ASSERT_TRUE(v.ok());
  std::ofstream(root_ + "/d/e/deep.txt") << "x";
  fs::create_directories(root_ + "/d/e/f");
  std::ofstream(root_ + "/d/e/f/deeper") << "y";
  auto paths = [](const std::vector<FileInfo>& l) {
    std::vector<std::string> p;
    for (const auto& f : l) p.push_back(f.path);
    return p;
  };
  auto one = v->list("/d", 1);
  ASSERT_TRUE(one.ok()) << one.error().message();
  EXPECT_EQ(paths(*one), (std::vector<std::string>{"/d/e", "/d/f.txt", "/d/rel", "/d/up"}));
  auto two = v->list("/d", 2);
  ASSERT_TRUE(two.ok()) << two.error().message();
  // Each directory's entries after it; "up" (a link to the outside) is
  // listed and never descended into.
  EXPECT_EQ(paths(*two), (std::vector<std::string>{"/d/e", "/d/e/deep.txt", "/d/e/f", "/d/f.txt",
                                                   "/d/rel", "/d/up"}));
  auto all = v->list("/", kMaxListDepth);
  ASSERT_TRUE(all.ok());
  for (const auto& f : *all) EXPECT_EQ(f.path.find("secret"), std::string::npos) << f.path;
  EXPECT_EQ(all->size(), 9u);  // abs, d, its 4, e's 2, f's 1
  EXPECT_GT((*all)[0].atime_ms, 0);
  EXPECT_GT((*all)[0].ctime_ms, 0);
  EXPECT_EQ(v->list("/d", 0).error().code(), Code::kInvalidArgument);
  EXPECT_EQ(v->list("/d", kMaxListDepth + 1).error().code(), Code::kInvalidArgument);
}

TEST_F(VolumeFilesTest, SetsModeAndOwnerOfTheObjectItself) {
  auto v = VolumeFiles::open(root_, false);
  ASSERT_TRUE(v.ok());
  Attributes a;
  a.mode = 0600;
  auto f = v->setAttributes("/d/f.txt", a);
  ASSERT_TRUE(f.ok()) << f.error().message();
  EXPECT_EQ(f->mode, 0600u);
  EXPECT_EQ(v->stat("/d/f.txt").value().mode, 0600u);
  a.mode = 0711;
  EXPECT_EQ(v->setAttributes("/", a).value().mode, 0711u);
  // Never through a link: the one to the outside has no mode to set, and
  // what it points at keeps its own.
  const auto before = fs::status(top_).permissions();
  EXPECT_EQ(v->setAttributes("/abs", a).error().code(), Code::kInvalidArgument);
  EXPECT_EQ(v->setAttributes("/abs/secret", a).error().code(), Code::kInvalidArgument);
  EXPECT_EQ(fs::status(top_).permissions(), before);
  a.mode = 010000;
  EXPECT_EQ(v->setAttributes("/d/f.txt", a).error().code(), Code::kInvalidArgument);
  EXPECT_EQ(v->setAttributes("/nope", Attributes{}).error().code(), Code::kNotFound);
  auto ro = VolumeFiles::open(root_, true);
  EXPECT_EQ(ro->setAttributes("/d/f.txt", Attributes{}).error().code(), Code::kFailedPrecondition);
  if (::geteuid() != 0) GTEST_SKIP() << "chown needs root";
  Attributes own;
  own.uid = 1000;
  own.gid = 1001;
  auto o = v->setAttributes("/d/f.txt", own);
  ASSERT_TRUE(o.ok()) << o.error().message();
  EXPECT_EQ(o->uid, 1000u);
  EXPECT_EQ(o->gid, 1001u);
  EXPECT_EQ(o->mode, 0600u);  // kept
  // A link's own owner changes; its target's does not.
  struct stat out {};
  ASSERT_EQ(::stat(top_.c_str(), &out), 0);
  auto l = v->setAttributes("/abs", own);
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_EQ(l->uid, 1000u);
  struct stat after {};
  ASSERT_EQ(::stat(top_.c_str(), &after), 0);
  EXPECT_EQ(after.st_uid, out.st_uid);
}

TEST_F(VolumeFilesTest, AWriteThatMayNotReplaceRefusesAnExistingFile) {
  auto v = VolumeFiles::open(root_, false);
  ASSERT_TRUE(v.ok());
  WriteOptions keep;
  keep.replace = false;
  keep.mode = 0640;
  EXPECT_EQ(v->write("/d/f.txt", keep).error().code(), Code::kAlreadyExists);
  EXPECT_EQ(v->write("/d/rel", keep).error().code(), Code::kAlreadyExists);  // a link too
  auto w = v->write("/d/new.txt", keep);
  ASSERT_TRUE(w.ok()) << w.error().message();
  ASSERT_TRUE(w->append("late").ok());
  // Made meanwhile (by a guest, say): the rename refuses to replace it.
  std::ofstream(root_ + "/d/new.txt") << "first";
  EXPECT_EQ(w->commit().error().code(), Code::kAlreadyExists);
  EXPECT_EQ(slurp(*v->openRead("/d/new.txt")), "first");
  auto w2 = v->write("/d/other.txt", keep);
  ASSERT_TRUE(w2.ok());
  ASSERT_TRUE(w2->append("ok").ok());
  auto info = w2->commit();
  ASSERT_TRUE(info.ok()) << info.error().message();
  EXPECT_EQ(info->mode, 0640u);
  if (::geteuid() != 0) GTEST_SKIP() << "chown needs root";
  WriteOptions owned;
  owned.uid = 1000;
  owned.gid = 1000;
  auto w3 = v->write("/d/f.txt", owned);
  ASSERT_TRUE(w3.ok());
  ASSERT_TRUE(w3->append("theirs").ok());
  auto i3 = w3->commit();
  ASSERT_TRUE(i3.ok());
  EXPECT_EQ(i3->uid, 1000u);
  EXPECT_EQ(i3->gid, 1000u);
  EXPECT_EQ(i3->mode, 0644u);
}

}  // namespace
}  // namespace vessel::volumes
