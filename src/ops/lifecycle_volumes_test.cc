// Volumes in a sandbox create as the lifecycle handles them: names
// resolved in the tenant's volumes (missing, another tenant's, a snapshot
// without read_only: refused before anything is stored), volume_mounts
// recorded with the sandbox, mounted once its VM runs (a failed mount
// fails the sandbox and destroys its VM), let go at delete.
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

}  // namespace
}  // namespace vessel::ops
