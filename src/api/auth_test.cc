// API keys in both forms: the Vessel key and its E2B form (e2b_ + hex of
// the key's bytes) name the same tenant; anything else is refused alike.
#include "api/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/sha256.h"

namespace vessel::api {
namespace {

std::string readLine(const std::string& path) {
  std::ifstream f(path);
  std::string s;
  std::getline(f, s);
  return s;
}

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/auth-" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto s = store::openSqlite(dir_ + "/vessel.db");
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  std::unique_ptr<store::Store> store_;
};

TEST(E2bKeyForm, EncodesTheKeysBytesAsLowercaseHex) {
  EXPECT_EQ(e2bKeyForm("vsk_0a"), "e2b_76736b5f3061");
  auto back = decodeE2bKeyForm("e2b_76736b5f3061");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, "vsk_0a");
  EXPECT_EQ(decodeE2bKeyForm("e2b_76736B5F3061").value_or(""), "vsk_0a");  // either case
}

TEST(E2bKeyForm, RefusesWhatIsNotTheForm) {
  for (std::string bad :
       {"", "e2b_", "e2b_7", "e2b_7g", "e2b_76 73", "vsk_7673", "E2B_7673", "e2b_76736b5f30610"})
    EXPECT_FALSE(decodeE2bKeyForm(bad).has_value()) << bad;
  // Bounded: 256 decoded bytes at most.
  EXPECT_TRUE(decodeE2bKeyForm("e2b_" + std::string(512, 'a')).has_value());
  EXPECT_FALSE(decodeE2bKeyForm("e2b_" + std::string(514, 'a')).has_value());
}

TEST_F(AuthTest, BothFormsOfAKeyNameItsTenant) {
  auto key = newApiKey();
  ASSERT_TRUE(key.ok());
  ASSERT_TRUE(store_->createTenant("acme", "Acme").ok());
  ASSERT_TRUE(store_->addApiKey("acme", sha256Hex(*key)).ok());
  EXPECT_EQ(tenantForKey(*key, *store_).value_or("?"), "acme");
  std::string e2b = e2bKeyForm(*key);
  EXPECT_EQ(e2b.size(), 4 + 2 * key->size());
  EXPECT_EQ(tenantForKey(e2b, *store_).value_or("?"), "acme");
  // Decoded once only, and a wrong or altered key is the same refusal.
  for (const std::string& bad : {e2bKeyForm(e2b), e2b.substr(0, e2b.size() - 2) + "00",
                                 std::string("e2b_zz"), std::string("vsk_nope")}) {
    auto t = tenantForKey(bad, *store_);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.error().code(), Code::kUnauthenticated);
  }
}

TEST_F(AuthTest, DevTenantWritesBothKeyFilesOwnerOnly) {
  auto key = ensureDevTenant(*store_, dir_);
  ASSERT_TRUE(key.ok()) << key.error().message();
  ASSERT_FALSE(key->empty());
  EXPECT_EQ(readLine(dir_ + "/dev-api-key"), *key);
  std::string e2b = readLine(dir_ + "/dev-e2b-api-key");
  EXPECT_EQ(e2b, e2bKeyForm(*key));
  EXPECT_EQ(tenantForKey(e2b, *store_).value_or("?"), "dev");
  for (const char* f : {"/dev-api-key", "/dev-e2b-api-key"}) {
    struct stat st {};
    ASSERT_EQ(::stat((dir_ + f).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
  // A later start: nothing new, and a missing E2B file comes back from dev-api-key.
  std::filesystem::remove(dir_ + "/dev-e2b-api-key");
  auto again = ensureDevTenant(*store_, dir_);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
  EXPECT_EQ(readLine(dir_ + "/dev-e2b-api-key"), e2b);
  // ...but never from a file that is not the dev tenant's key.
  std::filesystem::remove(dir_ + "/dev-e2b-api-key");
  { std::ofstream(dir_ + "/dev-api-key") << "vsk_forged\n"; }
  ASSERT_TRUE(ensureDevTenant(*store_, dir_).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/dev-e2b-api-key"));
}

}  // namespace
}  // namespace vessel::api
