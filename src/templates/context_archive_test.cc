#include "templates/context_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/fd.h"
#include "templates/build_context.h"
#include "templates/dockerfile.h"

namespace vessel::templates {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// One member of a hand-made tar.
struct Member {
  std::string name;
  mode_t type = AE_IFREG;
  std::string content;   // a file's
  std::string link;      // a symbolic link's target
  std::string hard;      // a hard link's target
  la_int64_t size = -1;  // the declared size; -1: the content's
};

class ContextArchiveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vessel-tar-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ + "/out");
    fs::create_directories(root_ + "/ctx");
  }
  void TearDown() override { fs::remove_all(root_); }

  // A tar of `members`, written with libarchive as any client might.
  std::string tar(const std::vector<Member>& members) {
    std::string path = root_ + "/in.tar";
    archive* a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    EXPECT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
    for (const auto& m : members) {
      archive_entry* e = archive_entry_new();
      archive_entry_copy_pathname(e, m.name.c_str());
      archive_entry_set_filetype(e, m.type);
      archive_entry_set_perm(e, 0644);
      if (!m.link.empty()) archive_entry_copy_symlink(e, m.link.c_str());
      if (!m.hard.empty()) archive_entry_copy_hardlink(e, m.hard.c_str());
      if (m.type == AE_IFCHR) archive_entry_set_rdev(e, ::makedev(1, 3));
      if (m.type == AE_IFREG && m.hard.empty())
        archive_entry_set_size(e, m.size >= 0 ? m.size : static_cast<la_int64_t>(m.content.size()));
      archive_write_header(a, e);
      if (!m.content.empty()) archive_write_data(a, m.content.data(), m.content.size());
      archive_entry_free(e);
    }
    archive_write_close(a);
    archive_write_free(a);
    return path;
  }
  Status unpack(const std::vector<Member>& members, UnpackLimits limits = {}) {
    return unpackContextTar(tar(members), root_ + "/out", limits);
  }
  std::string out(const std::string& rel) { return root_ + "/out/" + rel; }
  std::string root_;
};

TEST_F(ContextArchiveTest, UnpacksFilesDirectoriesAndLinksKeptAsLinks) {
  auto s = unpack({{.name = "./Dockerfile", .content = "FROM vessel://minimal\n"},
                   {.name = "a/b/deep.txt", .content = "deep"},  // no directory members
                   {.name = "dir/", .type = AE_IFDIR},
                   {.name = "dir/link", .type = AE_IFLNK, .link = "/etc/passwd"},
                   {.name = "dir/hard", .hard = "a/b/deep.txt"},
                   {.name = std::string(150, 'n') + "/" + std::string(150, 'm'), .content = "x"}});
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(*readFile(out("Dockerfile")), "FROM vessel://minimal\n");
  EXPECT_EQ(*readFile(out("a/b/deep.txt")), "deep");
  EXPECT_EQ(*readFile(out("dir/hard")), "deep");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(out("dir/link"))));
  EXPECT_EQ(fs::read_symlink(out("dir/link")), "/etc/passwd") << "kept, not followed";
  EXPECT_EQ(*readFile(out(std::string(150, 'n') + "/" + std::string(150, 'm'))), "x");
}

TEST_F(ContextArchiveTest, RefusesNamesOutsideTheTree) {
  for (std::string name : {"/etc/evil", "../evil", "a/../../evil", "a/.."}) {
    auto s = unpack({{.name = name, .content = "x"}});
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_EQ(s.error().code(), Code::kInvalidArgument);
    EXPECT_THAT(s.error().message(), HasSubstr("member '" + name + "'"));
  }
  EXPECT_FALSE(fs::exists(root_ + "/evil"));
  auto h = unpack({{.name = "x", .hard = "../../etc/passwd"}});
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(h.error().message(), HasSubstr("a hard link out of the tree"));
  auto abs = unpack({{.name = "y", .hard = "/etc/passwd"}});
  ASSERT_FALSE(abs.ok());
  EXPECT_THAT(abs.error().message(), HasSubstr("a hard link out of the tree"));
}

TEST_F(ContextArchiveTest, NeverWritesThroughASymbolicLink) {
  // The classic: a link to a directory outside, then a member under it.
  std::string outside = root_ + "/ctx";
  auto s = unpack({{.name = "escape", .type = AE_IFLNK, .link = outside},
                   {.name = "escape/planted", .content = "x"}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), HasSubstr("through the symbolic link escape"));
  EXPECT_FALSE(fs::exists(outside + "/planted"));
  // A link inside the tree is no way through either, nor is a directory
  // member of the link's name.
  auto in = unpack({{.name = "real/", .type = AE_IFDIR},
                    {.name = "alias", .type = AE_IFLNK, .link = "real"},
                    {.name = "alias/f", .content = "x"}});
  ASSERT_FALSE(in.ok());
  auto d = unpack(
      {{.name = "l2", .type = AE_IFLNK, .link = outside}, {.name = "l2/", .type = AE_IFDIR}});
  ASSERT_FALSE(d.ok());
  // A later member of the same name replaces the link itself.
  auto r = unpack({{.name = "over", .type = AE_IFLNK, .link = outside + "/target"},
                   {.name = "over", .content = "mine"}});
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_FALSE(fs::exists(outside + "/target"));
  EXPECT_EQ(*readFile(out("over")), "mine");
}

TEST_F(ContextArchiveTest, RefusesDevicesAndWhatIsNotATar) {
  auto s = unpack({{.name = "null", .type = AE_IFCHR}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), HasSubstr("a device, FIFO or socket"));
  std::string junk = root_ + "/junk.tar";
  std::ofstream(junk) << std::string(4096, 'j');
  auto j = unpackContextTar(junk, out(""));
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(j.error().message(), HasSubstr("not a tar"));
}

TEST_F(ContextArchiveTest, ReadsTheDockerfileThroughNoLink) {
  auto s = unpack({{.name = "ci/Dockerfile", .content = "FROM vessel://minimal\n"},
                   {.name = "Dockerfile", .type = AE_IFLNK, .link = "/etc/passwd"}});
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(*readContextFile(out(""), "ci/Dockerfile", 1 << 20), "FROM vessel://minimal\n");
  auto link = readContextFile(out(""), "Dockerfile", 1 << 20);
  ASSERT_FALSE(link.ok());
  EXPECT_THAT(link.error().message(), HasSubstr("symbolic link"));
  auto none = readContextFile(out(""), "other/Dockerfile", 1 << 20);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.error().message(), HasSubstr("no other/Dockerfile in the build context"));
  EXPECT_FALSE(readContextFile(out(""), "../x", 1 << 20).ok());
  EXPECT_FALSE(readContextFile(out(""), "ci/Dockerfile", 4).ok()) << "over its bound";
}

TEST_F(ContextArchiveTest, KeepsToItsLimits) {
  UnpackLimits l;
  l.max_bytes = 1000;
  auto big = unpack({{.name = "a", .content = std::string(600, 'a')},
                     {.name = "b", .content = std::string(600, 'b')}},
                    l);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code(), Code::kResourceExhausted);
  l = {};
  l.max_entries = 2;
  auto many = unpack({{.name = "a"}, {.name = "b"}, {.name = "c"}}, l);
  ASSERT_FALSE(many.ok());
  EXPECT_EQ(many.error().code(), Code::kResourceExhausted);
}

TEST_F(ContextArchiveTest, WritesTheContextMinusWhatDockerignoreExcludes) {
  std::string c = root_ + "/ctx";
  auto put = [&](const std::string& rel, const std::string& text) {
    fs::create_directories(fs::path(c + "/" + rel).parent_path());
    std::ofstream(c + "/" + rel) << text;
  };
  put(".dockerignore", "node_modules\n*.key\nDockerfile\nci\n");
  put("ci/Dockerfile", "FROM vessel://debian\n");
  put("ci/other", "no");
  put("Dockerfile", "FROM vessel://minimal\n");
  put("src/main.c", "int main(){}\n");
  put("run.sh", "#!/bin/sh\n");
  fs::permissions(c + "/run.sh", fs::perms(0755));
  put("secret.key", "no");
  put("node_modules/x/y.js", "no");
  fs::create_symlink("src/main.c", c + "/link");
  std::string t = root_ + "/ctx.tar";
  Fd fd(::open(t.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  auto w =
      writeContextTar(c, fd.get(), {"Dockerfile", "ci/Dockerfile"}, {{"extra.txt", "from memory"}});
  ASSERT_TRUE(w.ok()) << w.error().message();
  fd.reset();
  auto u = unpackContextTar(t, out(""));
  ASSERT_TRUE(u.ok()) << u.error().message();
  EXPECT_EQ(*readFile(out("Dockerfile")), "FROM vessel://minimal\n") << "sent though excluded";
  EXPECT_EQ(*readFile(out("src/main.c")), "int main(){}\n");
  EXPECT_EQ(*readFile(out("extra.txt")), "from memory");
  EXPECT_TRUE(fs::exists(out(".dockerignore")));
  EXPECT_EQ(*readFile(out("ci/Dockerfile")), "FROM vessel://debian\n") << "under an excluded dir";
  EXPECT_FALSE(fs::exists(out("ci/other")));
  EXPECT_FALSE(fs::exists(out("secret.key")));
  EXPECT_FALSE(fs::exists(out("node_modules")));
  EXPECT_EQ(fs::read_symlink(out("link")), "src/main.c");
  EXPECT_EQ(fs::status(out("run.sh")).permissions() & fs::perms::all, fs::perms(0755));
}

// What the API does with what the CLI sends: the context written, then
// unpacked, its Dockerfile read and its COPY read by BuildContext.
TEST_F(ContextArchiveTest, WhatTheWriterWritesBuildContextReads) {
  std::string c = root_ + "/ctx";
  fs::create_directories(c + "/sub");
  std::ofstream(c + "/sub/big.bin") << std::string(700 << 10, 'b');
  std::string t = root_ + "/ctx.tar";
  Fd fd(::open(t.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  auto w =
      writeContextTar(c, fd.get(), {std::string(kOutsideDockerfile)},
                      {{std::string(kOutsideDockerfile), "FROM vessel://minimal\nCOPY . /ctx/\n"}});
  ASSERT_TRUE(w.ok()) << w.error().message();
  fd.reset();
  ASSERT_TRUE(unpackContextTar(t, out("")).ok());
  auto text = readContextFile(out(""), std::string(kOutsideDockerfile), 1 << 20);
  ASSERT_TRUE(text.ok());
  fs::remove(out(std::string(kOutsideDockerfile)));
  auto plan = parseDockerfile(*text);
  ASSERT_TRUE(plan.ok());
  ContextLimits l;
  l.max_bytes = 4 << 20;
  auto ctx = BuildContext::open(out(""), l);
  ASSERT_TRUE(ctx.ok());
  auto spec = ctx->spec(*plan, "app");
  ASSERT_TRUE(spec.ok()) << spec.error().message();
  size_t files = 0;
  for (const auto& st : spec->steps) files += st.kind == BuildStep::Kind::kWrite;
  EXPECT_EQ(files, 1u) << "big.bin only, not the Dockerfile from outside";
}

}  // namespace
}  // namespace vessel::templates
