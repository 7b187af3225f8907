#include "e2b/access_token.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "store/store.h"

namespace vessel::e2b {
namespace {

TEST(AccessTokensTest, OnePerSandboxStableAndKeyed) {
  auto a = AccessTokens::withKey(std::string(32, 'a'));
  auto b = AccessTokens::withKey(std::string(32, 'b'));
  std::string t = a.forSandbox("sb-1");
  EXPECT_EQ(t.size(), 64u);
  EXPECT_EQ(t, a.forSandbox("sb-1"));
  EXPECT_NE(t, a.forSandbox("sb-2"));
  EXPECT_NE(t, b.forSandbox("sb-1"));
  EXPECT_TRUE(a.check("sb-1", t));
  EXPECT_FALSE(a.check("sb-2", t));
  EXPECT_FALSE(a.check("sb-1", t.substr(0, 63)));
  EXPECT_FALSE(a.check("sb-1", ""));
  EXPECT_FALSE(b.check("sb-1", t));
}

// A volume token names its tenant and works for its one volume only; it
// is neither a sandbox's token nor made without the key.
TEST(AccessTokensTest, AVolumeTokenIsItsVolumesAndTenantsAlone) {
  auto a = AccessTokens::withKey(std::string(32, 'a'));
  auto b = AccessTokens::withKey(std::string(32, 'b'));
  std::string t = a.forVolume("dev", "vol-1");
  EXPECT_EQ(t.substr(0, 11), "vvt_646576_");  // "dev" in hex
  EXPECT_EQ(t, a.forVolume("dev", "vol-1"));
  EXPECT_EQ(a.checkVolume("vol-1", t), std::optional<std::string>("dev"));
  EXPECT_FALSE(a.checkVolume("vol-2", t));
  EXPECT_FALSE(b.checkVolume("vol-1", t));
  EXPECT_NE(t, a.forVolume("other", "vol-1"));
  // Another tenant's name spliced into the token does not carry its MAC.
  std::string forged = "vvt_6f74686572" + t.substr(10);
  EXPECT_FALSE(a.checkVolume("vol-1", forged));
  EXPECT_FALSE(a.checkVolume("vol-1", t.substr(0, t.size() - 1)));
  EXPECT_FALSE(a.checkVolume("vol-1", ""));
  EXPECT_FALSE(a.checkVolume("vol-1", "vvt__" + t.substr(11)));
  EXPECT_FALSE(a.checkVolume("vol-1", "vvt_zz_" + t.substr(11)));
  EXPECT_FALSE(a.checkVolume("vol-1", a.forSandbox("vol-1")));
  EXPECT_FALSE(a.checkVolume("", t));
  // Without the key (a node), nothing is a volume token.
  auto node = AccessTokens::nodeSide("node-secret-0123456789");
  EXPECT_FALSE(node.checkVolume("vol-1", AccessTokens::withKey("").forVolume("dev", "vol-1")));
}

// Many machines: a node holds no key, so it neither computes nor accepts a
// token (not even one made under the empty key); it accepts only a
// replica's forward proof, bound to the sandbox it names.
TEST(AccessTokensTest, ANodeAcceptsOnlyAReplicasForwardProof) {
  auto replica = AccessTokens::withKey(std::string(32, 'a'));
  replica.setForwardSecret("node-secret-0123456789");
  auto node = AccessTokens::nodeSide("node-secret-0123456789");
  EXPECT_FALSE(node.hasKey());
  EXPECT_FALSE(node.check("sb-1", replica.forSandbox("sb-1")));
  EXPECT_FALSE(node.check("sb-1", AccessTokens::withKey("").forSandbox("sb-1")));
  std::string proof = replica.forwardProof("sb-1");
  EXPECT_EQ(proof.size(), 64u);
  EXPECT_TRUE(node.forwarded("sb-1", proof));
  EXPECT_FALSE(node.forwarded("sb-2", proof));
  EXPECT_FALSE(node.forwarded("sb-1", replica.forSandbox("sb-1")));
  EXPECT_FALSE(AccessTokens::nodeSide("other-secret-0123456789").forwarded("sb-1", proof));
  EXPECT_FALSE(AccessTokens::nodeSide("").forwarded("sb-1", ""));
}

// A store from before the key left it gets the key cleared.
TEST(AccessTokensTest, TheStoresOldKeyIsForgotten) {
  std::string path = ::testing::TempDir() + "/e2b-token-store-" + std::to_string(::getpid());
  std::filesystem::remove(path);
  {
    auto st = store::openSqlite(path);
    ASSERT_TRUE(st.ok()) << st.error().message();
    ASSERT_TRUE((*st)->setMeta("e2b_token_key", std::string(64, 'a')).ok());
    ASSERT_TRUE(AccessTokens::forgetStoredKey(**st).ok());
    auto left = (*st)->getMeta("e2b_token_key");
    ASSERT_TRUE(left.ok());
    EXPECT_TRUE(!*left || (*left)->empty());
    EXPECT_TRUE(AccessTokens::forgetStoredKey(**st).ok());
  }
  for (const char* sfx : {"", "-wal", "-shm"}) std::filesystem::remove(path + sfx);
}

TEST(AccessTokensTest, TrafficTokensDifferFromEnvdTokens) {
  auto a = AccessTokens::withKey(std::string(32, 'k'));
  std::string t = a.trafficForSandbox("sb-1");
  EXPECT_EQ(t.size(), 64u);
  EXPECT_EQ(t, a.trafficForSandbox("sb-1"));
  EXPECT_NE(t, a.trafficForSandbox("sb-2"));
  EXPECT_NE(t, a.forSandbox("sb-1"));
  EXPECT_FALSE(a.check("sb-1", t));
}

TEST(AccessTokensTest, TheKeyFileIsMadeOnceAndKept) {
  std::string dir = ::testing::TempDir() + "/e2b-token-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto first = AccessTokens::open(dir);
  ASSERT_TRUE(first.ok()) << first.error().message();
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/e2b-token-key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 32);
  auto again = AccessTokens::open(dir);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(first->forSandbox("x"), again->forSandbox("x"));
  // A damaged key is an error, never silently replaced.
  std::ofstream(dir + "/e2b-token-key", std::ios::trunc) << "short";
  EXPECT_FALSE(AccessTokens::open(dir).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vessel::e2b
