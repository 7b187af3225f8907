// Volumes in the store (issue 27, migrations 16-17): names unique per
// tenant, the tenant quota checked with the insert, deletes refused while
// a mount names the volume unless forced; both engines. A node's role
// reads only the volumes placed on it (PostgreSQL).
#include "store/node_roles.h"
#include "store/store_test.h"

namespace vessel::store {
namespace {

VolumeRecord volume(const std::string& id, const std::string& tenant, const std::string& name,
                    uint64_t mib) {
  VolumeRecord v;
  v.id = id;
  v.tenant_id = tenant;
  v.name = name;
  v.size_mib = mib;
  v.created_ms = 7;
  return v;
}

TEST_P(StoreTest, VolumesAreNamedPerTenantWithinTheQuota) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  ASSERT_TRUE(st.createTenant("t2", "two").ok());
  ASSERT_TRUE(st.insertVolume(volume("vol-1", "t1", "data", 1024), 2048).ok());
  // The same name in another tenant is another volume; twice in one is not.
  ASSERT_TRUE(st.insertVolume(volume("vol-2", "t2", "data", 1024), 2048).ok());
  auto dup = st.insertVolume(volume("vol-3", "t1", "data", 16), 2048);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code(), Code::kAlreadyExists) << dup.error().message();
  // 1024 + 1025 > 2048: refused, and nothing inserted; 1024 fits exactly.
  auto over = st.insertVolume(volume("vol-4", "t1", "big", 1025), 2048);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code(), Code::kResourceExhausted) << over.error().message();
  EXPECT_FALSE(st.getVolume("t1", "big")->has_value());
  VolumeRecord snap = volume("vol-5", "t1", "snap", 1024);
  snap.read_only = true;
  snap.source_id = "vol-1";
  ASSERT_TRUE(st.insertVolume(snap, 2048).ok());
  EXPECT_EQ(st.insertVolume(volume("vol-6", "t1", "more", 1), 2048).error().code(),
            Code::kResourceExhausted);
  EXPECT_TRUE(st.insertVolume(volume("vol-6", "t1", "more", 1), -1).ok());  // no limit
  EXPECT_EQ(st.insertVolume(volume("vol-7", "nobody", "x", 1), -1).error().code(), Code::kNotFound);

  auto got = st.getVolume("t1", "snap");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->id, "vol-5");
  EXPECT_TRUE((*got)->read_only);
  EXPECT_EQ((*got)->source_id, "vol-1");
  EXPECT_EQ((*got)->size_mib, 1024u);
  EXPECT_EQ((*got)->created_ms, 7);
  EXPECT_FALSE(st.getVolume("t2", "snap")->has_value());  // another tenant's name
  auto mine = st.listVolumes("t1");
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 3u);
  EXPECT_EQ((*mine)[0].name, "data");
  EXPECT_EQ((*mine)[1].name, "more");
  EXPECT_EQ(st.listVolumes("t2")->size(), 1u);
  EXPECT_EQ(st.listNodeVolumes("")->size(), 4u);
  EXPECT_TRUE(st.listNodeVolumes("n1")->empty());
}

TEST_P(StoreTest, AMountedVolumeIsDeletedOnlyWhenForced) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  ASSERT_TRUE(st.insertVolume(volume("vol-1", "t1", "data", 64), -1).ok());
  ASSERT_TRUE(st.insertVolume(volume("vol-2", "t1", "free", 64), -1).ok());
  ASSERT_TRUE(st.insertVolumeMount({"sb-1", "vol-1", "/data", false}).ok());
  ASSERT_TRUE(st.insertVolumeMount({"sb-2", "vol-1", "/mnt/d", true}).ok());
  EXPECT_EQ(st.insertVolumeMount({"sb-2", "vol-2", "/mnt/d", false}).error().code(),
            Code::kAlreadyExists);  // one volume per path of a sandbox
  auto mounts = st.listVolumeMounts("vol-1");
  ASSERT_TRUE(mounts.ok());
  ASSERT_EQ(mounts->size(), 2u);
  EXPECT_EQ((*mounts)[1].path, "/mnt/d");
  EXPECT_TRUE((*mounts)[1].read_only);
  ASSERT_TRUE(st.insertVolumeMount({"sb-2", "vol-2", "/mnt", false}).ok());
  auto of_sb2 = st.listSandboxVolumeMounts("sb-2");
  ASSERT_TRUE(of_sb2.ok()) << of_sb2.error().message();
  ASSERT_EQ(of_sb2->size(), 2u);
  EXPECT_EQ((*of_sb2)[0].path, "/mnt");  // the parent first
  EXPECT_EQ((*of_sb2)[0].volume_id, "vol-2");
  EXPECT_EQ((*of_sb2)[1].path, "/mnt/d");
  EXPECT_TRUE(st.listSandboxVolumeMounts("sb-9")->empty());
  // A template's expected volumes, replaced whole.
  ASSERT_TRUE(
      st.setTemplateVolumes("t1", "t-1-app",
                            {{"", "", "data", "/data", false}, {"", "", "snap", "/s", true}})
          .ok());
  ASSERT_TRUE(st.setTemplateVolumes("t1", "t-1-app", {{"", "", "data", "/data", false}}).ok());
  auto expects = st.listTemplateVolumes("t1", "t-1-app");
  ASSERT_TRUE(expects.ok()) << expects.error().message();
  ASSERT_EQ(expects->size(), 1u);
  EXPECT_EQ((*expects)[0].name, "data");
  EXPECT_EQ((*expects)[0].path, "/data");
  EXPECT_EQ((*expects)[0].template_name, "t-1-app");
  EXPECT_TRUE(st.listTemplateVolumes("t2", "t-1-app")->empty());
  EXPECT_EQ(*st.deleteSandboxVolumeMounts("sb-2"), 2);
  ASSERT_TRUE(st.insertVolumeMount({"sb-2", "vol-1", "/mnt/d", true}).ok());

  auto refused = st.deleteVolume("t1", "data", false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kFailedPrecondition) << refused.error().message();
  EXPECT_TRUE(st.getVolume("t1", "data")->has_value());
  EXPECT_EQ(*st.deleteSandboxVolumeMounts("sb-1"), 1);
  EXPECT_EQ(st.deleteVolume("t1", "data", false).error().code(), Code::kFailedPrecondition);
  auto forced = st.deleteVolume("t1", "data", true);
  ASSERT_TRUE(forced.ok()) << forced.error().message();
  EXPECT_EQ(forced->id, "vol-1");
  EXPECT_FALSE(st.getVolume("t1", "data")->has_value());
  EXPECT_TRUE(st.listVolumeMounts("vol-1")->empty());
  EXPECT_EQ(st.deleteVolume("t1", "data", true).error().code(), Code::kNotFound);
  EXPECT_EQ(st.deleteVolume("t2", "free", false).error().code(), Code::kNotFound);
  EXPECT_TRUE(st.deleteVolume("t1", "free", false).ok());
}

// A node's role (store/node_roles.h) reads the volumes placed on it and
// the mounts of its own sandboxes, and changes none. (Roles are the
// server's, shared by the binary's tests: names of this test's own.)
TEST(NodeRolesTest, ANodesRoleReadsOnlyItsOwnVolumes) {
  std::string why;
  auto* pg = pgServer(&why);
  ASSERT_NE(pg, nullptr) << why;
  auto url = pg->createDatabase("node_roles_volumes_test");
  ASSERT_TRUE(url.ok()) << url.error().message();
  auto owner = openPostgres(*url);
  ASSERT_TRUE(owner.ok()) << owner.error().message();
  Store& o = **owner;
  ASSERT_TRUE(o.createTenant("t1", "t1").ok());
  ASSERT_TRUE(o.insertSandbox({"sb-1", "t1", "minimal", SandboxState::kRunning}).ok());
  ASSERT_TRUE(o.insertSandbox({"sb-2", "t1", "minimal", SandboxState::kRunning}).ok());
  ASSERT_TRUE(o.setSandboxNode("sb-1", "vn1").ok());
  ASSERT_TRUE(o.setSandboxNode("sb-2", "vn2").ok());
  VolumeRecord a = volume("vol-a", "t1", "a", 64), b = volume("vol-b", "t1", "b", 64);
  a.node = "vn1";
  b.node = "vn2";
  ASSERT_TRUE(o.insertVolume(a, -1).ok());
  ASSERT_TRUE(o.insertVolume(b, -1).ok());
  ASSERT_TRUE(o.insertVolumeMount({"sb-1", "vol-a", "/a", false}).ok());
  ASSERT_TRUE(o.insertVolumeMount({"sb-2", "vol-a", "/a", false}).ok());
  ASSERT_TRUE(createNodeRole(*url, "vn1", "store-password-of-vn1").ok());
  auto at = url->find('@'), scheme = url->find("://");
  auto as_vn1 = openPostgres(url->substr(0, scheme + 3) + "vn1" + url->substr(at));
  ASSERT_TRUE(as_vn1.ok()) << as_vn1.error().message();
  Store& n1 = **as_vn1;
  auto mine = n1.listNodeVolumes("vn1");
  ASSERT_TRUE(mine.ok()) << mine.error().message();
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ((*mine)[0].id, "vol-a");
  EXPECT_TRUE(n1.listNodeVolumes("vn2")->empty());
  EXPECT_FALSE(n1.getVolume("t1", "b")->has_value());
  auto mounts = n1.listVolumeMounts("vol-a");
  ASSERT_TRUE(mounts.ok()) << mounts.error().message();
  ASSERT_EQ(mounts->size(), 1u);
  EXPECT_EQ((*mounts)[0].sandbox_id, "sb-1");
  EXPECT_FALSE(n1.insertVolume(volume("vol-c", "t1", "c", 1), -1).ok());
  EXPECT_FALSE(n1.deleteVolume("t1", "a", true).ok());
  EXPECT_TRUE(o.getVolume("t1", "a")->has_value());
}

}  // namespace
}  // namespace vessel::store
