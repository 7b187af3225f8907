// The lifecycle (ops::Lifecycle, real SQLite store) over vesseld's
// LocalNode over node::Runtime over the fake hypervisor: the whole
// in-process stack below the API, with the real agent on the host instead
// of QEMU guests. Supervision (a VM killed behind the node's back), a
// guest that stops answering during a resume, delete in the states that
// used to refuse or restore, and a restart that takes sandboxes over.
#include "vesseld/local_node.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <filesystem>

#include "agentclient/testing/agent_harness.h"
#include "base/clock.h"
#include "base/sha256.h"
#include "hypervisor/testing/fake_hypervisor.h"
#include "ops/lifecycle.h"
#include "ops/state_machine.h"
#include "store/store.h"

namespace vessel::vesseld {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using hypervisor::testing::FakeHypervisor;
using ::testing::HasSubstr;

class LocalNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vessel-local-node-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_TRUE(writeFileAtomic(dir_ + "/vmlinux", "not a kernel\n").ok());
    auto s = store::openSqlite(dir_ + "/vessel.db", &clock_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    ASSERT_TRUE(store_->createTenant("t1", "one").ok());
    templates_ = std::make_unique<templates::TemplateStore>(dir_ + "/templates", "fake", "k");
    installTemplate("minimal");
    hv_ = std::make_unique<FakeHypervisor>(hypervisor::testing::FakeOptions{VESSEL_AGENT_BINARY});
    opts_.root = dir_ + "/root";
    opts_.kernel = dir_ + "/vmlinux";
    opts_.grow_disks = false;  // the host-run agent has no disk of its own
    opts_.pool_size = 0;
    opts_.ready_timeout = 10s;
    opts_.guest_call_timeout = 10s;
  }
  void TearDown() override {
    stopStack();
    if (hv_) EXPECT_EQ(hv_->live(), 0u) << "fake VMs left running";
    hv_.reset();
    lc_.reset();
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // vesseld's wiring, as its composition root makes it (without egress).
  void startStack() {
    rt_ = std::make_unique<node::Runtime>(io_, *hv_, *templates_, opts_);
    node_ = std::make_unique<LocalNode>(io_, *rt_, nullptr);
    lc_ = std::make_unique<ops::Lifecycle>(io_, *store_, *node_, *templates_, clock_);
  }
  // A clean stop that leaves running VMs for the next process.
  void stopStack(bool stop_vms = true) {
    if (lc_) {
      bool done = false;
      asio::co_spawn(
          io_,
          [this, stop_vms, &done]() -> asio::awaitable<void> {
            co_await lc_->shutdown(stop_vms);
            done = true;
          },
          asio::detached);
      waitFor([&] { return done; }, 10s);
    }
    lc_.reset();
    node_.reset();
    rt_.reset();
  }
  void installTemplate(const std::string& name) {
    auto s = hypervisor::testing::installFakeTemplate(*templates_, dir_ + "/staging-" + name, name);
    ASSERT_TRUE(s.ok()) << s.error().message();
  }

  // Runs the io loop until `done` holds or `limit` passes; whether it held.
  template <typename Pred>
  bool waitFor(Pred done, std::chrono::milliseconds limit) {
    auto end = std::chrono::steady_clock::now() + limit;
    io_.restart();
    while (!done() && std::chrono::steady_clock::now() < end) io_.run_one_for(10ms);
    return done();
  }
  // The operation once it has ended (or as it is at the limit).
  store::OperationRecord awaitOp(const std::string& op_id, std::chrono::milliseconds limit = 10s) {
    std::optional<Result<store::OperationRecord>> got;
    auto deadline = std::chrono::steady_clock::now() + limit;
    asio::co_spawn(
        io_,
        [&]() -> asio::awaitable<void> {
          got = co_await lc_->awaitOperation("t1", op_id, deadline);
        },
        asio::detached);
    EXPECT_TRUE(waitFor([&] { return got.has_value(); }, limit + 1s));
    if (!got || !got->ok()) {
      auto o = store_->getOperation("t1", op_id);
      return o.ok() && *o ? **o : store::OperationRecord{};
    }
    return **got;
  }
  std::string state(const std::string& id) {
    auto sb = store_->getSandbox("t1", id);
    if (!sb.ok() || !*sb) return "absent";
    return std::string(ops::stateName((*sb)->state));
  }
  std::string created() {
    ops::CreateRequest c;
    c.tenant = "t1";
    auto r = lc_->create(c);
    EXPECT_TRUE(r.ok()) << r.error().message();
    if (!r.ok()) return "";
    auto op = awaitOp(r->operation.id);
    EXPECT_EQ(op.state, ops::OpState::kDone) << op.error_message;
    return r->sandbox.id;
  }
  bool ended(const Result<ops::Accepted>& a, ops::OpState want = ops::OpState::kDone) {
    if (!a.ok()) {
      ADD_FAILURE() << a.error().message();
      return false;
    }
    auto op = awaitOp(a->operation.id);
    EXPECT_EQ(op.state, want) << op.error_message;
    return op.state == want;
  }
  std::string sh(const std::string& id, std::string cmd) {
    auto agent = node_->agent(id);
    if (!agent) return "<no agent>";
    agentclient::ExecSpec e;
    e.shell = std::move(cmd);
    auto r = agentclient::testing::runFor(io_, agent->run(std::move(e)), 10s);
    if (!r.ok()) return "<" + r.error().message() + ">";
    return r->out;
  }
  bool nothingLeftOf(const std::string& id) {
    return !fs::exists(opts_.root + "/sandboxes/" + id) && fs::is_empty(opts_.root + "/vms");
  }

  std::string dir_;
  FakeWallClock clock_;
  asio::io_context io_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<templates::TemplateStore> templates_;
  std::unique_ptr<FakeHypervisor> hv_;
  node::RuntimeOptions opts_;
  std::unique_ptr<node::Runtime> rt_;
  std::unique_ptr<LocalNode> node_;
  std::unique_ptr<ops::Lifecycle> lc_;
};

TEST_F(LocalNodeTest, CreatePauseResumeForkDelete) {
  startStack();
  std::string id = created();
  EXPECT_EQ(state(id), "running");
  EXPECT_EQ(sh(id, "uname -n"), id + "\n");
  ASSERT_TRUE(ended(lc_->pause("t1", id)));
  EXPECT_EQ(state(id), "paused");
  EXPECT_EQ(node_->holding(id), ops::Holding::kPaused);
  EXPECT_EQ(hv_->live(), 0u);
  ASSERT_TRUE(ended(lc_->resume("t1", id)));
  EXPECT_EQ(state(id), "running");
  EXPECT_EQ(sh(id, "uname -n"), id + "\n");
  auto f = lc_->fork("t1", id, 1);
  ASSERT_TRUE(ended(f));
  std::string copy = f->copies.at(0).id;
  EXPECT_EQ(state(copy), "running");
  EXPECT_EQ(sh(copy, "uname -n"), copy + "\n");
  for (const auto& s : {copy, id}) {
    ASSERT_TRUE(ended(lc_->remove("t1", s)));
    EXPECT_EQ(state(s), "deleted");
  }
  EXPECT_EQ(hv_->live(), 0u);
  EXPECT_TRUE(nothingLeftOf(id));
}

TEST_F(LocalNodeTest, AKilledVmFailsItsSandboxWithTheReasonWithinASecond) {
  startStack();
  std::string id = created();
  auto sb = node_->sandbox(id);
  ASSERT_TRUE(sb && sb->vm());
  ASSERT_TRUE(hv_->crash(sb->vm()->pid()).ok());
  sb.reset();
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(waitFor([&] { return state(id) == "failed"; }, 5s)) << state(id);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  auto rec = lc_->get("t1", id);
  ASSERT_TRUE(rec.ok());
  EXPECT_THAT(rec->error, HasSubstr("killed by signal 9"));
  // Released: VM, files, the node's hold.
  EXPECT_EQ(node_->holding(id), ops::Holding::kNothing);
  EXPECT_EQ(hv_->live(), 0u);
  EXPECT_TRUE(nothingLeftOf(id));
  ASSERT_TRUE(ended(lc_->remove("t1", id)));
  EXPECT_EQ(state(id), "deleted");
}

// A client that kills the QEMU and deletes the sandbox at once: the delete
// may land at any io turn of the watcher's finding out (its channel
// closed, the grace for the exit to show, the exit). Each is tried; the
// delete wins or the loss is reported, and vesseld neither crashes nor
// leaves anything (CI once lost vesseld here: the watcher used a VM the
// delete had destroyed).
TEST_F(LocalNodeTest, ADeleteRightAfterTheVmDiedIsSafeAtEveryStepOfFindingOut) {
  startStack();
  for (int turns = 0; turns < 12; ++turns) {
    std::string id = created();
    auto sb = node_->sandbox(id);
    ASSERT_TRUE(sb && sb->vm());
    ASSERT_TRUE(hv_->crash(sb->vm()->pid()).ok());
    sb.reset();
    io_.restart();
    for (int i = 0; i < turns; ++i) io_.run_one_for(20ms);
    auto del = lc_->remove("t1", id);
    if (del.ok()) {
      auto op = awaitOp(del->operation.id);
      EXPECT_EQ(op.state, ops::OpState::kDone)
          << "after " << turns << " turns: " << op.error_message;
    } else {
      // Found out first: the sandbox failed, and a failed one is deleted.
      ASSERT_TRUE(waitFor([&] { return state(id) == "failed"; }, 5s)) << state(id);
      ASSERT_TRUE(ended(lc_->remove("t1", id)));
    }
    ASSERT_TRUE(waitFor([&] { return state(id) == "deleted"; }, 5s))
        << "after " << turns << " turns: " << state(id);
    EXPECT_EQ(node_->holding(id), ops::Holding::kNothing);
    ASSERT_TRUE(waitFor([&] { return hv_->live() == 0u && nothingLeftOf(id); }, 5s))
        << "after " << turns << " turns";
  }
}

TEST_F(LocalNodeTest, AGuestThatStopsAnsweringDuringResumeFailsItAndDeleteStillWorks) {
  opts_.guest_call_timeout = 300ms;
  startStack();
  std::string id = created();
  ASSERT_TRUE(ended(lc_->pause("t1", id)));
  hv_->stallGuestCalls(true);
  auto r = lc_->resume("t1", id);
  ASSERT_TRUE(r.ok());
  auto op = awaitOp(r->operation.id, 5s);
  EXPECT_EQ(op.state, ops::OpState::kFailed);
  EXPECT_THAT(op.error_message, HasSubstr("did not answer"));
  EXPECT_GE(hv_->stalledCalls(), 1u);
  EXPECT_NE(state(id), "resuming");
  EXPECT_EQ(hv_->live(), 0u);
  hv_->stallGuestCalls(false);
  ASSERT_TRUE(ended(lc_->remove("t1", id)));
  EXPECT_EQ(state(id), "deleted");
  EXPECT_TRUE(nothingLeftOf(id));
}

TEST_F(LocalNodeTest, DeleteWhileResumingCancelsTheStuckResume) {
  opts_.guest_call_timeout = 60s;  // the host deadline is not what ends it
  startStack();
  std::string id = created();
  ASSERT_TRUE(ended(lc_->pause("t1", id)));
  std::optional<Result<ops::Accepted>> del;
  hv_->stallGuestCalls(true, [&] {
    if (!del) del = lc_->remove("t1", id);
  });
  auto r = lc_->resume("t1", id);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(waitFor([&] { return del.has_value(); }, 5s)) << "the guest never stalled";
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(ended(*del));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  auto resume_op = awaitOp(r->operation.id, 1s);
  EXPECT_EQ(resume_op.state, ops::OpState::kFailed);
  EXPECT_EQ(state(id), "deleted");
  EXPECT_EQ(hv_->live(), 0u);
  EXPECT_TRUE(nothingLeftOf(id));
}

TEST_F(LocalNodeTest, DeletingAPausedSandboxWhoseStateIsGoneDoesNotRestoreIt) {
  startStack();
  std::string id = created();
  ASSERT_TRUE(ended(lc_->pause("t1", id)));
  ASSERT_TRUE(fs::remove(opts_.root + "/sandboxes/" + id + "/pause.state"));
  size_t started = hv_->started();
  ASSERT_TRUE(ended(lc_->remove("t1", id)));
  EXPECT_EQ(hv_->started(), started) << "a VM was started to delete a paused sandbox";
  EXPECT_EQ(state(id), "deleted");
  EXPECT_TRUE(nothingLeftOf(id));
}

TEST_F(LocalNodeTest, ARestartTakesTheRunningSandboxOver) {
  startStack();
  std::string id = created();
  ASSERT_EQ(sh(id, "echo before"), "before\n");
  stopStack(false);  // VMs left running for the next process
  EXPECT_EQ(hv_->live(), 1u);
  startStack();
  std::optional<int> taken;
  asio::co_spawn(
      io_, [&]() -> asio::awaitable<void> { taken = co_await lc_->recover(); }, asio::detached);
  ASSERT_TRUE(waitFor([&] { return taken.has_value(); }, 10s));
  EXPECT_EQ(*taken, 1);
  EXPECT_EQ(state(id), "running");
  EXPECT_EQ(sh(id, "uname -n"), id + "\n");
  ASSERT_TRUE(ended(lc_->remove("t1", id)));
}

}  // namespace
}  // namespace vessel::vesseld
