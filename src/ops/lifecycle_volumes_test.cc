// Volumes in a sandbox create as the lifecycle handles them: names
// resolved in the tenant's volumes (missing, another tenant's, a snapshot
// without read_only: refused before anything is stored), volume_mounts
// recorded with the sandbox, mounted once its VM runs (a failed mount
// fails the sandbox and destroys its VM), let go at delete; quieted around
// a save of its memory (held for a pause's resume, not for a fork's) and
// mounted again when its VM runs again (resumed, a fork's copy).
#include "ops/testing/lifecycle_fixture.h"

namespace vessel::ops {
namespace {

using ::testing::HasSubstr;
using LifecycleTest = testing::LifecycleTest;

class FakeMounter : public VolumeMounter {
 public:
  asio::awaitable<Status> mount(std::string id, std::shared_ptr<agentclient::AgentClient>,
                                std::vector<VolumeAttachment> v) override {
    std::string call = "mount " + id;
    for (const auto& a : v) call += " " + a.volume_id + ":" + a.path + (a.read_only ? ":ro" : "");
    calls.push_back(call);
    if (fail) co_return Error(Code::kInternal, "mount failed here");
    co_return okStatus();
  }
  asio::awaitable<void> quiesce(std::string id, std::shared_ptr<agentclient::AgentClient>,
                                bool hold) override {
    calls.push_back("quiesce " + id + (hold ? " hold" : ""));
    co_return;
  }
  asio::awaitable<void> unquiesce(std::string id,
                                  std::shared_ptr<agentclient::AgentClient>) override {
    calls.push_back("unquiesce " + id);
    co_return;
  }
  void release(const std::string& id) override { calls.push_back("release " + id); }
  std::vector<std::string> calls;
  bool fail = false;
};

class LifecycleVolumesTest : public LifecycleTest {
 protected:
  void addVolume(const std::string& tenant, const std::string& id, const std::string& name,
                 bool read_only = false) {
    store::VolumeRecord v;
    v.id = id;
    v.tenant_id = tenant;
    v.name = name;
    v.size_mib = 64;
    v.read_only = read_only;
    ASSERT_TRUE(store_->insertVolume(v, 1 << 20).ok());
  }
  static CreateRequest withVolume(const std::string& name, const std::string& path,
                                  bool ro = false) {
    CreateRequest c;
    c.tenant = "t1";
    c.volumes.push_back({"", name, path, ro});
    return c;
  }
  FakeMounter mounter_;
};

TEST_F(LifecycleVolumesTest, WithoutAMounterVolumesAreUnavailable) {
  addVolume("t1", "vol-1", "data");
  auto r = lc_->create(withVolume("data", "/data"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kUnavailable);
}

TEST_F(LifecycleVolumesTest, NamesAreTheTenantsAndSnapshotsReadOnly) {
  lc_->setVolumeMounter(&mounter_);
  addVolume("t1", "vol-1", "data");
  addVolume("t1", "vol-2", "snap", true);
  addVolume("t2", "vol-3", "theirs");
  auto missing = lc_->create(withVolume("nope", "/data"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), Code::kNotFound);
  EXPECT_THAT(missing.error().message(), HasSubstr("volume 'nope' does not exist"));
  auto foreign = lc_->create(withVolume("theirs", "/data"));
  ASSERT_FALSE(foreign.ok());
  EXPECT_EQ(foreign.error().code(), Code::kNotFound);
  auto snap = lc_->create(withVolume("snap", "/data"));
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.error().code(), Code::kInvalidArgument);
  // Nothing was stored or asked of the node for them.
  auto page = lc_->list(ListRequest{"t1"});
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->sandboxes.empty());
  EXPECT_TRUE(node_->calls.empty());
  EXPECT_TRUE(mounter_.calls.empty());
  // A snapshot read-only is fine.
  std::string id = created(withVolume("snap", "/snap", true));
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(mounter_.calls.size(), 1u);
  EXPECT_EQ(mounter_.calls[0], "mount " + id + " vol-2:/snap:ro");
}

TEST_F(LifecycleVolumesTest, MountedOnceRunningRecordedAndLetGoAtDelete) {
  lc_->setVolumeMounter(&mounter_);
  addVolume("t1", "vol-1", "data");
  std::string id = created(withVolume("data", "/data"));
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(state(id), "running");
  ASSERT_EQ(mounter_.calls.size(), 1u);
  EXPECT_EQ(mounter_.calls[0], "mount " + id + " vol-1:/data");
  auto rows = store_->listVolumeMounts("vol-1");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].sandbox_id, id);
  EXPECT_EQ((*rows)[0].path, "/data");
  ASSERT_TRUE(lc_->remove("t1", id).ok());
  drain();
  EXPECT_EQ(state(id), "deleted");
  EXPECT_EQ(mounter_.calls.back(), "release " + id);
  EXPECT_TRUE(store_->listVolumeMounts("vol-1")->empty());
}

TEST_F(LifecycleVolumesTest, AFailedMountFailsTheSandboxAndEndsItsVm) {
  lc_->setVolumeMounter(&mounter_);
  mounter_.fail = true;
  addVolume("t1", "vol-1", "data");
  auto r = lc_->create(withVolume("data", "/data"));
  ASSERT_TRUE(r.ok()) << r.error().message();
  drain();
  std::string id = r->sandbox.id;
  EXPECT_EQ(state(id), "failed");
  EXPECT_EQ(op(r->operation.id).state, OpState::kFailed);
  EXPECT_THAT(op(r->operation.id).error_message, HasSubstr("mount failed here"));
  EXPECT_EQ(node_->calls.back(), "destroy " + id);
  EXPECT_EQ(mounter_.calls.back(), "release " + id);
  EXPECT_TRUE(store_->listVolumeMounts("vol-1")->empty());
}

TEST_F(LifecycleVolumesTest, APauseHoldsTheMountsAndItsResumeMountsThemAgain) {
  lc_->setVolumeMounter(&mounter_);
  addVolume("t1", "vol-1", "data");
  addVolume("t1", "vol-2", "more");
  CreateRequest c = withVolume("more", "/data/more");
  c.volumes.push_back({"", "data", "/data", false});
  std::string id = created(c);
  ASSERT_FALSE(id.empty());
  mounter_.calls.clear();
  ASSERT_TRUE(lc_->pause("t1", id).ok());
  drain();
  EXPECT_EQ(state(id), "paused");
  ASSERT_TRUE(lc_->resume("t1", id).ok());
  drain();
  EXPECT_EQ(state(id), "running");
  // The parent directory's mount first, whatever order the create named.
  std::vector<std::string> want = {"quiesce " + id + " hold",
                                   "mount " + id + " vol-1:/data vol-2:/data/more"};
  EXPECT_EQ(mounter_.calls, want);
  // A pause without memory boots anew: nothing is held, its servers stop.
  mounter_.calls.clear();
  ASSERT_TRUE(lc_->pause("t1", id, false).ok());
  drain();
  ASSERT_TRUE(lc_->resume("t1", id).ok());
  drain();
  want = {"release " + id, "mount " + id + " vol-1:/data vol-2:/data/more"};
  EXPECT_EQ(mounter_.calls, want);
}

TEST_F(LifecycleVolumesTest, AForksCopiesMountTheirParentsVolumes) {
  lc_->setVolumeMounter(&mounter_);
  addVolume("t1", "vol-1", "data");
  std::string parent = created(withVolume("data", "/data"));
  ASSERT_FALSE(parent.empty());
  mounter_.calls.clear();
  auto f = lc_->fork("t1", parent, 2);
  ASSERT_TRUE(f.ok()) << f.error().message();
  drain();
  ASSERT_EQ(f->copies.size(), 2u);
  std::string a = f->copies[0].id, b = f->copies[1].id;
  EXPECT_EQ(state(a), "running");
  std::vector<std::string> want = {"quiesce " + parent, "unquiesce " + parent,
                                   "mount " + a + " vol-1:/data", "mount " + b + " vol-1:/data"};
  EXPECT_EQ(mounter_.calls, want);
  auto rows = store_->listVolumeMounts("vol-1");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 3u);
  // Each copy lets go of its own at its delete; the parent keeps its.
  ASSERT_TRUE(lc_->remove("t1", a).ok());
  drain();
  EXPECT_EQ(store_->listVolumeMounts("vol-1")->size(), 2u);
  EXPECT_EQ(store_->listSandboxVolumeMounts(parent)->size(), 1u);
}

// In a cluster each volume is on one node (store volumes.node): a create
// runs on its volumes' node, and volumes of two nodes are refused (409)
// before anything is stored.
TEST_F(LifecycleVolumesTest, ASandboxRunsOnItsVolumesNode) {
  lc_->setVolumeMounter(&mounter_);
  for (auto [id, name, node] : {std::tuple{"vol-1", "a", "n1"}, std::tuple{"vol-2", "b", "n1"},
                                std::tuple{"vol-3", "c", "n2"}}) {
    store::VolumeRecord v;
    v.id = id;
    v.tenant_id = "t1";
    v.name = name;
    v.size_mib = 64;
    v.node = node;
    ASSERT_TRUE(store_->insertVolume(v, 1 << 20).ok());
  }
  CreateRequest two = withVolume("a", "/a");
  two.volumes.push_back({"", "c", "/c", false});
  auto refused = lc_->create(two);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kFailedPrecondition);
  EXPECT_THAT(refused.error().message(), HasSubstr("are on different nodes (n1, n2)"));
  EXPECT_TRUE(node_->calls.empty());
  EXPECT_TRUE(lc_->list(ListRequest{"t1"})->sandboxes.empty());

  CreateRequest same = withVolume("a", "/a");
  same.volumes.push_back({"", "b", "/b", false});
  std::string id = created(same);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(node_->placed_on[id], "n1");
  EXPECT_EQ(mounter_.calls.back(), "mount " + id + " vol-1:/a vol-2:/b");
  // Without volumes: anywhere.
  CreateRequest plain;
  plain.tenant = "t1";
  std::string free = created(plain);
  ASSERT_FALSE(free.empty());
  EXPECT_EQ(node_->placed_on.count(free), 0u);
}

}  // namespace
}  // namespace vessel::ops
