// A node's own store role on a real PostgreSQL (issue 24, item 5): what a
// taken-over node's store credentials reach. Its own row and sandboxes, and
// the credentials sealed for its live sandboxes; not another node's row or
// sandboxes, no tenant's stored credentials (even holding the replicas'
// key), nor the meta a replica writes; a role made before volumes existed
// reads its own volumes once migrated.
#include "store/node_roles.h"

#include <gtest/gtest.h>

#include "store/store.h"
#include "store/store_test.h"

namespace vessel::store {
namespace {

// `url` with its user replaced by `user` (the test server trusts every
// local connection: no password is checked).
std::string asUser(const std::string& url, const std::string& user) {
  auto at = url.find('@'), scheme = url.find("://");
  return url.substr(0, scheme + 3) + user + url.substr(at);
}

TEST(NodeRolesTest, ANodesRoleReachesOnlyItsOwnRowAndSandboxes) {
  std::string why;
  auto* pg = pgServer(&why);
  ASSERT_NE(pg, nullptr) << why;
  auto url = pg->createDatabase("node_roles_test");
  ASSERT_TRUE(url.ok()) << url.error().message();
  auto owner = openPostgres(*url);
  ASSERT_TRUE(owner.ok()) << owner.error().message();
  Store& o = **owner;
  for (const char* t : {"t1", "t2"}) ASSERT_TRUE(o.createTenant(t, t).ok());
  for (const char* n : {"n1", "n2"}) {
    NodeRecord r;
    r.name = n;
    r.advertise_url = std::string("http://") + n + ":8091";
    ASSERT_TRUE(o.heartbeatNode(r).ok());
  }
  ASSERT_TRUE(o.insertSandbox({"sb-1", "t1", "minimal", SandboxState::kRunning}).ok());
  ASSERT_TRUE(o.insertSandbox({"sb-2", "t2", "minimal", SandboxState::kRunning}).ok());
  ASSERT_TRUE(o.setSandboxNode("sb-1", "n1").ok());
  ASSERT_TRUE(o.setSandboxNode("sb-2", "n2").ok());
  const std::string key(32, 'k');
  ASSERT_TRUE(o.useCredentialKey(key).ok());
  ASSERT_TRUE(o.putCredential({"t1", "c1", {"api.one"}, "Authorization", "value-of-t1", 1}).ok());
  ASSERT_TRUE(o.putCredential({"t2", "c2", {"api.two"}, "Authorization", "value-of-t2", 1}).ok());

  ASSERT_TRUE(o.insertSandbox({"sb-3", "t1", "minimal", SandboxState::kRunning}).ok());
  ASSERT_TRUE(o.setSandboxNode("sb-3", "n1").ok());
  for (const char* sb : {"sb-1", "sb-2", "sb-3"})
    ASSERT_TRUE(o.setSandboxCredentials(sb, {{"c", std::string("sealed-for-") + sb}}).ok());
  ASSERT_TRUE(o.setSandboxState("sb-3", SandboxState::kDeleted, "").ok());

  ASSERT_TRUE(createNodeRole(*url, "n1", "store-password-of-n1").ok());
  auto again = createNodeRole(*url, "n1", "store-password-of-n1");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), Code::kAlreadyExists);
  auto as_n1 = openPostgres(asUser(*url, "n1"));
  ASSERT_TRUE(as_n1.ok()) << as_n1.error().message();
  Store& n1 = **as_n1;

  // Its own: its sandboxes, its tenants' credentials, its row.
  auto mine = n1.listNodeSandboxes("n1");
  ASSERT_TRUE(mine.ok()) << mine.error().message();
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ((*mine)[0].id, "sb-1");
  auto shared = n1.sandboxCredential("sb-1", "c");
  ASSERT_TRUE(shared.ok()) << shared.error().message();
  EXPECT_EQ(shared->value_or(""), "sealed-for-sb-1");
  // No stored credential: it holds no key, and with the key the rows are
  // not there for its role.
  auto c1 = n1.getCredential("t1", "c1");
  ASSERT_FALSE(c1.ok());
  EXPECT_EQ(c1.error().code(), Code::kFailedPrecondition);
  EXPECT_FALSE(n1.useCredentialKey(key).ok());  // its role may not read credentials at all
  // A role made before migration 15 could; the policies now hide every row.
  ASSERT_TRUE(pg->exec("node_roles_test", "GRANT SELECT ON credentials TO n1").ok());
  ASSERT_TRUE(n1.useCredentialKey(key).ok());
  c1 = n1.getCredential("t1", "c1");
  ASSERT_TRUE(c1.ok()) << c1.error().message();
  EXPECT_FALSE(c1->has_value()) << "node n1 read a stored credential";
  NodeRecord self;
  self.name = "n1";
  self.advertise_url = "http://n1:8091";
  EXPECT_TRUE(n1.heartbeatNode(self).ok());
  EXPECT_TRUE(n1.setSandboxState("sb-1", SandboxState::kPaused, "").ok());
  EXPECT_TRUE(n1.setMeta("node_token_sha256:n1", std::string(64, 'a')).ok());

  // Another node's sandboxes and their tenants' credentials: not there.
  auto theirs = n1.listNodeSandboxes("n2");
  ASSERT_TRUE(theirs.ok());
  EXPECT_TRUE(theirs->empty());
  auto sb2 = n1.findSandbox("sb-2");
  ASSERT_TRUE(sb2.ok());
  EXPECT_FALSE(sb2->has_value());
  for (const char* sb : {"sb-2", "sb-3"}) {  // another node's; its own, deleted
    auto other = n1.sandboxCredential(sb, "c");
    ASSERT_TRUE(other.ok());
    EXPECT_FALSE(other->has_value()) << sb;
  }
  EXPECT_FALSE(n1.setSandboxCredentials("sb-1", {{"c", "forged"}}).ok());
  EXPECT_EQ(o.sandboxCredential("sb-1", "c")->value_or(""), "sealed-for-sb-1");
  auto c2 = n1.getCredential("t2", "c2");
  ASSERT_TRUE(c2.ok());
  EXPECT_FALSE(c2->has_value()) << "node n1 read another node's tenant's credential";
  auto all2 = n1.listCredentials("t2");
  ASSERT_TRUE(all2.ok());
  EXPECT_TRUE(all2->empty());

  // Another node's row, its sandboxes, and the replicas' meta: unwritten.
  NodeRecord other;
  other.name = "n2";
  other.advertise_url = "http://evil:8091";
  EXPECT_FALSE(n1.heartbeatNode(other).ok());
  EXPECT_TRUE(n1.setSandboxState("sb-2", SandboxState::kFailed, "taken").ok());  // no row
  EXPECT_TRUE(n1.setSandboxNode("sb-2", "n1").ok());                             // no row
  EXPECT_FALSE(n1.setSandboxNode("sb-1", "n2").ok());  // nor give its own away
  EXPECT_FALSE(n1.setMeta("node_token_sha256:n2", std::string(64, 'b')).ok());
  EXPECT_FALSE(n1.setMeta("template_signature:t@v1", std::string(128, 'c')).ok());
  auto nodes = o.listNodes();
  ASSERT_TRUE(nodes.ok());
  for (const auto& n : *nodes)
    if (n.name == "n2") EXPECT_EQ(n.advertise_url, "http://n2:8091");
  auto still = o.getSandbox("t2", "sb-2");
  ASSERT_TRUE(still.ok() && still->has_value());
  EXPECT_EQ((*still)->state, SandboxState::kRunning);
  EXPECT_EQ((*still)->node, "n2");
  auto meta = o.getMeta("node_token_sha256:n2");
  ASSERT_TRUE(meta.ok());
  EXPECT_FALSE(meta->has_value());
}

// A node role made before migration 17 was granted no volumes; migration
// 19 grants every node role (a role holding SELECT on sandbox_credentials)
// the read a new one has, and the policies still narrow it to its own.
TEST(NodeRolesTest, RolesMadeBeforeVolumesReadTheirOwnVolumes) {
  std::string why;
  auto* pg = pgServer(&why);
  ASSERT_NE(pg, nullptr) << why;
  auto url = pg->createDatabase("node_roles_old_test");
  ASSERT_TRUE(url.ok()) << url.error().message();
  {
    auto owner = openPostgres(*url);
    ASSERT_TRUE(owner.ok()) << owner.error().message();
    ASSERT_TRUE((*owner)->createTenant("t1", "one").ok());
    for (auto [id, node] : {std::pair{"vol-1", "n9"}, std::pair{"vol-2", "n8"}}) {
      VolumeRecord v;
      v.id = id;
      v.tenant_id = "t1";
      v.name = std::string("name-") + id;
      v.size_mib = 64;
      v.node = node;
      ASSERT_TRUE((*owner)->insertVolume(v, -1).ok());
    }
  }
  // As `vessel node add` granted before migration 17.
  ASSERT_TRUE(pg->exec("node_roles_old_test",
                       "CREATE ROLE n9 LOGIN; GRANT SELECT ON schema_migrations, meta, nodes,"
                       " sandboxes, sandbox_credentials, sandbox_network, sandbox_ingress,"
                       " sessions, operations, events, sandbox_logs, templates TO n9;")
                  .ok());
  {
    auto before = openPostgres(asUser(*url, "n9"));
    ASSERT_TRUE(before.ok()) << before.error().message();
    EXPECT_FALSE((*before)->listNodeVolumes("n9").ok()) << "no grant on volumes yet";
  }
  // The upgrade: migration 19 runs (again, here) when a replica opens the store.
  ASSERT_TRUE(
      pg->exec("node_roles_old_test", "DELETE FROM schema_migrations WHERE number=19").ok());
  auto owner = openPostgres(*url);
  ASSERT_TRUE(owner.ok()) << owner.error().message();
  EXPECT_EQ((*owner)->schemaVersion(), 20);
  auto as_n9 = openPostgres(asUser(*url, "n9"));
  ASSERT_TRUE(as_n9.ok()) << as_n9.error().message();
  auto mine = (*as_n9)->listNodeVolumes("n9");
  ASSERT_TRUE(mine.ok()) << mine.error().message();
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ((*mine)[0].id, "vol-1");
  auto theirs = (*as_n9)->listNodeVolumes("n8");
  ASSERT_TRUE(theirs.ok());
  EXPECT_TRUE(theirs->empty());
}

}  // namespace
}  // namespace vessel::store
