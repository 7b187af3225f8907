#include "base/aead.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "base/base64.h"

namespace vessel {
namespace {

const std::string kKey(32, 'k');

TEST(AeadTest, SealsAndOpensUnderTheSameKeyAndContext) {
  for (std::string plain :
       {std::string(), std::string("Bearer sk-live-1234"), std::string(5000, 'x')}) {
    auto s = aeadSeal(kKey, "tenant/name", plain);
    ASSERT_TRUE(s.ok()) << s.error().message();
    EXPECT_TRUE(aeadSealed(*s));
    if (!plain.empty()) {
      EXPECT_EQ(s->find(plain), std::string::npos);
    }
    auto o = aeadOpen(kKey, "tenant/name", *s);
    ASSERT_TRUE(o.ok()) << o.error().message();
    EXPECT_EQ(*o, plain);
  }
  // A random nonce: the same secret seals differently each time.
  EXPECT_NE(*aeadSeal(kKey, "c", "same"), *aeadSeal(kKey, "c", "same"));
}

TEST(AeadTest, AnotherKeyContextOrAChangedByteDoesNotOpen) {
  auto s = aeadSeal(kKey, "sandbox-a/github", "secret");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(aeadOpen(std::string(32, 'K'), "sandbox-a/github", *s).error().code(),
            Code::kPermissionDenied);
  EXPECT_EQ(aeadOpen(kKey, "sandbox-b/github", *s).error().code(), Code::kPermissionDenied);
  auto raw = base64Decode(s->substr(3), 1024);
  ASSERT_TRUE(raw.ok());
  for (size_t i = 0; i < raw->size(); ++i) {
    std::string changed = *raw;
    changed[i] ^= 1;
    EXPECT_FALSE(aeadOpen(kKey, "sandbox-a/github", "v1:" + base64Encode(changed)).ok()) << i;
  }
  EXPECT_EQ(aeadOpen(kKey, "c", "plain text").error().code(), Code::kInvalidArgument);
  EXPECT_EQ(aeadOpen(kKey, "c", "v1:AAAA").error().code(), Code::kInvalidArgument);
  EXPECT_FALSE(aeadSeal("short", "c", "x").ok());
}

TEST(AeadTest, DerivedKeysDifferPerSecretAndLabel) {
  std::string a = aeadDeriveKey("token-of-n1", "label"), b = aeadDeriveKey("token-of-n2", "label");
  EXPECT_EQ(a.size(), kAeadKeyBytes);
  EXPECT_NE(a, b);
  EXPECT_NE(a, aeadDeriveKey("token-of-n1", "other"));
  EXPECT_EQ(a, aeadDeriveKey("token-of-n1", "label"));
}

TEST(AeadTest, AKeyFileIsMadeOnceWithMode0600AndAShortOneIsRefused) {
  char dir[] = "/tmp/aead-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/key";
  auto k1 = aeadKeyFile(path);
  ASSERT_TRUE(k1.ok());
  EXPECT_EQ(k1->size(), kAeadKeyBytes);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(*aeadKeyFile(path), *k1);
  std::string bad = std::string(dir) + "/short";
  FILE* f = std::fopen(bad.c_str(), "w");
  std::fputs("short", f);
  std::fclose(f);
  EXPECT_FALSE(aeadKeyFile(bad).ok());
  std::system(("rm -rf " + std::string(dir)).c_str());
}

}  // namespace
}  // namespace vessel
