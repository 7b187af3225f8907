// Credentials in the store (issue 24): values sealed at rest under the API
// side's key, and each sandbox's as sealed for its node. Both engines.
#include "store/store_test.h"

namespace vessel::store {
namespace {

// Issue 24: a credential's value is sealed at rest under the API side's
// key; without the key nothing puts or reads one; a value moved to
// another row, or read under another key, does not open.
TEST_P(StoreTest, CredentialValuesAreSealedAtRestUnderTheKey) {
  auto s = open();
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  ASSERT_TRUE(st.createTenant("t2", "two").ok());
  CredentialRecord c{"t1", "gh", {"api.a.test"}, "Authorization", "Bearer secret-123", 1};
  EXPECT_EQ(st.putCredential(c).error().code(), Code::kFailedPrecondition);
  EXPECT_FALSE(st.useCredentialKey("short").ok());
  ASSERT_EQ(*st.useCredentialKey(std::string(32, 'k')), 0);
  ASSERT_TRUE(st.putCredential(c).ok());
  std::string raw = rawText("SELECT value FROM credentials WHERE name='gh'");
  EXPECT_EQ(raw.find("secret-123"), std::string::npos) << raw;
  EXPECT_EQ(raw.rfind("v1:", 0), 0u) << raw;
  EXPECT_EQ((*st.getCredential("t1", "gh"))->value, "Bearer secret-123");
  // Copied into another tenant's row, it does not open there.
  rawExec(
      "INSERT INTO credentials SELECT 't2', name, hosts, header, value, created_ms"
      " FROM credentials WHERE tenant_id='t1'");
  EXPECT_EQ(st.getCredential("t2", "gh").error().code(), Code::kPermissionDenied);
  // Another process with another key (or none) reads nothing.
  auto other = open();
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->getCredential("t1", "gh").error().code(), Code::kFailedPrecondition);
  EXPECT_EQ((*other)->listCredentials("t1").error().code(), Code::kFailedPrecondition);
  ASSERT_TRUE((*other)->useCredentialKey(std::string(32, 'K')).ok());
  EXPECT_EQ((*other)->getCredential("t1", "gh").error().code(), Code::kPermissionDenied);
}

// What a replica seals for a sandbox's node: replaced whole by each set.
TEST_P(StoreTest, SandboxCredentialsAreReplacedWhole) {
  auto s = open();
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  ASSERT_TRUE(st.setSandboxCredentials("sb-1", {{"a", "v1:A"}, {"b", "v1:B"}}).ok());
  EXPECT_EQ(st.sandboxCredential("sb-1", "a")->value_or(""), "v1:A");
  EXPECT_FALSE(st.sandboxCredential("sb-2", "a")->has_value());
  ASSERT_TRUE(st.setSandboxCredentials("sb-1", {{"b", "v1:B2"}}).ok());
  EXPECT_FALSE(st.sandboxCredential("sb-1", "a")->has_value());
  EXPECT_EQ(st.sandboxCredential("sb-1", "b")->value_or(""), "v1:B2");
  ASSERT_TRUE(st.setSandboxCredentials("sb-1", {}).ok());
  EXPECT_FALSE(st.sandboxCredential("sb-1", "b")->has_value());
}

}  // namespace
}  // namespace vessel::store
