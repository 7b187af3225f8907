#include "base/sha256.h"

#include <gtest/gtest.h>

#include "base/fd.h"

namespace vessel {
namespace {

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, FileMatchesBytes) {
  std::string path = ::testing::TempDir() + "/sha256_test_file";
  std::string data(3 << 20, 'x');
  ASSERT_TRUE(writeFileAtomic(path, data).ok());
  auto h = sha256File(path);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(*h, sha256Hex(data));
  EXPECT_FALSE(sha256File(path + ".missing").ok());
}

}  // namespace
}  // namespace vessel
