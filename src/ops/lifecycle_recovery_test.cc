// Sandboxes that change without a request: a VM that is lost, and a
// restart that takes over, reruns or fails what the store says is alive.
#include "ops/testing/lifecycle_fixture.h"

namespace vessel::ops {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using LifecycleTest = testing::LifecycleTest;

TEST_F(LifecycleTest, ALostVmFailsItsSandboxWithTheReason) {
  std::string id = created();
  node_->lose(id, "its VM exited unexpectedly (killed by signal 9)");
  EXPECT_EQ(state(id), "failed");
  auto sb = lc_->get("t1", id);
  ASSERT_TRUE(sb.ok());
  EXPECT_THAT(sb->error, HasSubstr("killed by signal 9"));
  auto ev = eventTypes(id);
  ASSERT_FALSE(ev.empty());
  EXPECT_THAT(ev.back(), HasSubstr("sandbox.state"));
  EXPECT_THAT(ev.back(), HasSubstr("failed"));
  // A failed sandbox can still be deleted, and its files go.
  ASSERT_TRUE(lc_->remove("t1", id).ok());
  drain();
  EXPECT_EQ(state(id), "deleted");
}

TEST_F(LifecycleTest, RecoveryTakesOverRerunsAndFails) {
  // What an earlier process left: a running sandbox, one mid-pause whose VM
  // still runs, one mid-resume whose VM is gone, and one being deleted.
  auto rec = [&](const std::string& id, SandboxState st) {
    store::SandboxRecord r{id, "t1", "minimal", st, "", 1, 256};
    r.created_ms = r.updated_ms = r.last_active_ms = clock_.nowMs();
    r.expires_ms = clock_.nowMs() + 3600'000;
    ASSERT_TRUE(store_->insertSandbox(r).ok());
  };
  auto oper = [&](const std::string& op, const std::string& id, const std::string& kind) {
    store::OperationRecord o{op, "t1", id, kind, OpState::kRunning};
    o.created_ms = o.updated_ms = clock_.nowMs();
    ASSERT_TRUE(store_->insertOperation(o).ok());
  };
  rec("sb-run", SandboxState::kRunning);
  rec("sb-pausing", SandboxState::kPausing);
  oper("op-pause", "sb-pausing", "pause");
  rec("sb-resuming", SandboxState::kResuming);
  oper("op-resume", "sb-resuming", "resume");
  rec("sb-deleting", SandboxState::kDeleting);
  oper("op-delete", "sb-deleting", "delete");
  node_->adoptable = {{"sb-run", Holding::kRunning},
                      {"sb-pausing", Holding::kRunning},
                      {"sb-deleting", Holding::kPaused}};
  int adopted = 0;
  asio::co_spawn(
      io_, [&]() -> asio::awaitable<void> { adopted = co_await lc_->recover(); }, asio::detached);
  drain();
  EXPECT_EQ(adopted, 3);
  EXPECT_EQ(state("sb-run"), "running");
  EXPECT_EQ(state("sb-pausing"), "paused");  // the pause ran again
  EXPECT_EQ(op("op-pause").state, OpState::kDone);
  EXPECT_EQ(state("sb-resuming"), "failed");
  EXPECT_EQ(op("op-resume").state, OpState::kFailed);
  EXPECT_EQ(state("sb-deleting"), "deleted");
  EXPECT_EQ(op("op-delete").state, OpState::kDone);
  auto unfinished = store_->listUnfinishedOperations();
  ASSERT_TRUE(unfinished.ok());
  EXPECT_TRUE(unfinished->empty()) << "nothing stays pending";
}

}  // namespace
}  // namespace vessel::ops
