#include "base/sparse_copy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/fd.h"

namespace vessel {
namespace {

namespace fs = std::filesystem;

class SparseCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sparse-copy-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SparseCopyTest, CopiesDataAndKeepsHolesAndSize) {
  std::string from = (dir_ / "in").string(), to = (dir_ / "out").string();
  {
    std::ofstream f(from, std::ios::binary);
    f << "head";
    f.seekp(64 << 20);  // a 64 MiB hole
    f << "tail";
  }
  ASSERT_TRUE(copySparse(from, to, 0640).ok());
  std::ifstream g(to, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(g)), std::istreambuf_iterator<char>());
  ASSERT_EQ(all.size(), (64u << 20) + 4);
  EXPECT_EQ(all.substr(0, 4), "head");
  EXPECT_EQ(all.substr(all.size() - 4), "tail");
  EXPECT_EQ(all.find_first_not_of('\0', 4), all.size() - 4);
  struct stat st {};
  ASSERT_EQ(::stat(to.c_str(), &st), 0);
  EXPECT_LT(st.st_blocks * 512, 8 << 20) << "the hole was written as zeros";
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

// From tmpfs to the test's directory: copy_file_range refuses across
// filesystems (EXDEV), and the copy goes on by hand.
TEST_F(SparseCopyTest, CopiesAcrossFilesystems) {
  std::string from = "/dev/shm/sparse-copy-" + std::to_string(::getpid());
  std::string to = (dir_ / "out").string();
  ASSERT_TRUE(writeFileAtomic(from, std::string(200000, 'z') + "end").ok());
  Status s = copySparse(from, to);
  std::error_code ec;
  fs::remove(from, ec);
  ASSERT_TRUE(s.ok()) << s.error().message();
  std::ifstream g(to, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(g)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, std::string(200000, 'z') + "end");
}

TEST_F(SparseCopyTest, RefusesMoreDataThanItsBound) {
  std::string from = (dir_ / "in").string(), to = (dir_ / "out").string();
  ASSERT_TRUE(writeFileAtomic(from, std::string(3 << 20, 'x')).ok());
  auto r = copySparse(from, to, 0600, 1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kResourceExhausted);
  EXPECT_TRUE(copySparse(from, to, 0600, 4 << 20).ok());
}

TEST_F(SparseCopyTest, ReplacesWhatWasThereAndNamesAMissingSource) {
  std::string from = (dir_ / "in").string(), to = (dir_ / "out").string();
  ASSERT_TRUE(writeFileAtomic(to, std::string(1000, 'x')).ok());
  ASSERT_TRUE(writeFileAtomic(from, "short").ok());
  ASSERT_TRUE(copySparse(from, to).ok());
  EXPECT_EQ(fs::file_size(to), 5u);
  auto missing = copySparse((dir_ / "nope").string(), to);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message().find("nope"), std::string::npos);
}

}  // namespace
}  // namespace vessel
