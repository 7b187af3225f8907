// A sandbox's settings beside its record (store/settings.h), on both
// engines (StoreTest, instantiated in store_test.cc): ingress settings are
// written in the transaction that inserts the record and read with it;
// what cannot be read keeps the ports private.
#include <gtest/gtest.h>

#include "store/store.h"
#include "store/store_test.h"

namespace vessel::store {
namespace {

SandboxRecord sandbox(const std::string& id, std::optional<IngressSettings> ingress) {
  SandboxRecord r;
  r.id = id;
  r.tenant_id = "t1";
  r.template_name = "minimal";
  r.ingress = std::move(ingress);
  return r;
}

Store::Admission admitAll() {
  return [](const TenantLimits&, const TenantUsage&) { return std::optional<Error>(); };
}

TEST_P(StoreTest, IngressSettingsAreWrittenAndReadWithTheRecord) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  IngressSettings priv{false, "inside.test:${PORT}"};
  ASSERT_TRUE(st.insertSandboxAdmitted(sandbox("sb-p", priv), admitAll()).ok());
  ASSERT_TRUE(st.insertSandbox(sandbox("sb-q", IngressSettings{})).ok());
  ASSERT_TRUE(st.insertSandbox(sandbox("sb-n", std::nullopt)).ok());

  auto p = st.getSandbox("t1", "sb-p");
  ASSERT_TRUE(p.ok() && p->has_value());
  EXPECT_EQ((*p)->ingress, std::optional(priv));
  EXPECT_EQ((*st.findSandbox("sb-q"))->ingress, std::optional(IngressSettings{}));
  EXPECT_EQ((*st.findSandbox("sb-n"))->ingress, std::nullopt);
  // Every reader of records carries them.
  auto list = st.listSandboxes("t1", "", 10);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[1].ingress, std::optional(priv));
  auto live = st.listLiveSandboxes();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 3u);
  EXPECT_EQ((*live)[1].ingress, std::optional(priv));
}

TEST_P(StoreTest, AFailedIngressWriteLeavesNoSandbox) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  // A row left behind for the id (public): the private sandbox's ingress
  // write fails, and with it the insert: no sandbox, public or not.
  rawExec("INSERT INTO sandbox_ingress(sandbox_id,settings) VALUES('sb-x','{\"public\":true}')");
  rawExec("INSERT INTO sandbox_ingress(sandbox_id,settings) VALUES('sb-y','{\"public\":true}')");
  EXPECT_FALSE(
      st.insertSandboxAdmitted(sandbox("sb-x", IngressSettings{false, ""}), admitAll()).ok());
  EXPECT_FALSE(st.insertSandbox(sandbox("sb-y", IngressSettings{false, ""})).ok());
  for (const char* id : {"sb-x", "sb-y"}) {
    auto got = st.findSandbox(id);
    ASSERT_TRUE(got.ok()) << got.error().message();
    EXPECT_FALSE(got->has_value()) << id;
  }
  EXPECT_EQ(st.tenantUsage("t1")->sandboxes, 0);
}

TEST_P(StoreTest, UnreadableIngressSettingsArePrivatePorts) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  ASSERT_TRUE(st.insertSandbox(sandbox("sb-1", IngressSettings{true, "h:${PORT}"})).ok());
  ASSERT_TRUE(st.insertSandbox(sandbox("sb-2", IngressSettings{})).ok());
  rawExec("UPDATE sandbox_ingress SET settings='not json' WHERE sandbox_id='sb-1'");
  rawExec("UPDATE sandbox_ingress SET settings='{\"public\":\"yes\"}' WHERE sandbox_id='sb-2'");
  for (const char* id : {"sb-1", "sb-2"}) {
    auto got = st.findSandbox(id);
    ASSERT_TRUE(got.ok() && got->has_value()) << id;
    EXPECT_EQ((*got)->ingress, std::optional(IngressSettings{false, ""})) << id;
  }
}

TEST_P(StoreTest, CorruptNetworkSettingsAreAnError) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  ASSERT_TRUE(st.setSandboxNetwork("sb-1", NetworkSettings{"full", {}, {}, {}, {}}).ok());
  for (const char* text :
       {"nope", R"({"mode":"open"})", R"({"allow":[]})", R"({"mode":"allowlist","allow":[7]})"}) {
    rawExec(std::string("UPDATE sandbox_network SET settings='") + text +
            "' WHERE sandbox_id='sb-1'");
    auto got = st.getSandboxNetwork("sb-1");
    ASSERT_FALSE(got.ok()) << text;
    EXPECT_EQ(got.error().code(), Code::kInternal) << text;
  }
}

// Records are typed: metadata a map, a credential's hosts a list. A host
// list that does not read is an error, never "no hosts" (which would let
// the secret go to any host).
TEST_P(StoreTest, RecordsAreTypedAndUnreadableHostsAreAnError) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  SandboxRecord r = sandbox("sb-m", std::nullopt);
  r.metadata = {{"team", "a b"}, {"x", "1"}};
  ASSERT_TRUE(st.insertSandbox(r).ok());
  EXPECT_EQ((*st.findSandbox("sb-m"))->metadata, r.metadata);
  ASSERT_TRUE(st.useCredentialKey(std::string(32, 'k')).ok());
  ASSERT_TRUE(
      st.putCredential({"t1", "gh", {"api.a.test", "b.test"}, "Authorization", "x", 1}).ok());
  EXPECT_EQ((*st.getCredential("t1", "gh"))->hosts,
            (std::vector<std::string>{"api.a.test", "b.test"}));
  for (const char* hosts : {"garbage", "{}", "[7]"}) {
    rawExec(std::string("UPDATE credentials SET hosts='") + hosts + "' WHERE name='gh'");
    auto got = st.getCredential("t1", "gh");
    ASSERT_FALSE(got.ok()) << hosts;
    EXPECT_EQ(got.error().code(), Code::kInternal);
    EXPECT_FALSE(st.listCredentials("t1").ok()) << hosts;
  }
}

}  // namespace
}  // namespace vessel::store
