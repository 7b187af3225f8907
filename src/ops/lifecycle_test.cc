// The lifecycle service against a fake node, a real SQLite store and a
// fake clock: create, pause, resume, fork, delete in every state,
// supervision, the reaper and recovery, without QEMU, in milliseconds.
#include "ops/lifecycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <filesystem>
#include <fstream>

#include "base/run_blocking.h"
#include "base/sha256.h"
#include "ops/testing/fake_node.h"

namespace vessel::ops {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

class LifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/lifecycle-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/templates");
    auto s = store::openSqlite(dir_ + "/vessel.db", &clock_);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store_ = std::move(*s);
    ASSERT_TRUE(store_->createTenant("t1", "one").ok());
    ASSERT_TRUE(store_->createTenant("t2", "two").ok());
    templates_ = std::make_unique<templates::TemplateStore>(dir_ + "/templates", "q", "k");
    installTemplate("minimal");
    node_ = std::make_unique<testing::FakeNode>(io_);
    lc_ = std::make_unique<Lifecycle>(io_, *store_, *node_, *templates_, clock_);
  }
  void TearDown() override {
    lc_.reset();
    fs::remove_all(dir_);
  }
  // rootfs_bytes: a sparse root image of that size instead of a few bytes.
  void installTemplate(const std::string& name, uint64_t rootfs_bytes = 0) {
    std::string staging = dir_ + "/staging-" + name;
    fs::create_directories(staging);
    templates::Manifest m;
    m.name = name;
    m.version = "v1";
    m.spec_hash = std::string(64, 'a');
    m.qemu_version = "q";
    m.kernel_sha256 = "k";
    m.created_at = "2026-01-01T00:00:00Z";
    m.memory_mib = 256;
    for (const char* f : {templates::kRootfsFile, templates::kMemoryFile, templates::kStateFile}) {
      std::ofstream(staging + "/" + f) << f;
      m.files[f] = sha256Hex(f);
    }
    if (rootfs_bytes) {
      std::string rootfs = staging + "/" + templates::kRootfsFile;
      fs::resize_file(rootfs, rootfs_bytes);
      m.files[templates::kRootfsFile] = *sha256File(rootfs);
    }
    ASSERT_TRUE(templates_->install(staging, m).ok());
  }
  // Runs every handler that is ready (the fake node never blocks unless told).
  void drain() {
    for (int i = 0; i < 100; ++i) {
      io_.restart();
      if (io_.poll() == 0) return;
    }
  }
  std::string state(const std::string& id, const std::string& tenant = "t1") {
    auto sb = store_->getSandbox(tenant, id);
    if (!sb.ok() || !*sb) return "absent";
    return std::string(stateName((*sb)->state));
  }
  store::OperationRecord op(const std::string& id) {
    auto o = store_->getOperation("t1", id);
    return o.ok() && *o ? **o : store::OperationRecord{};
  }
  std::string created(CreateRequest c = {}) {
    c.tenant = "t1";
    auto r = lc_->create(c);
    EXPECT_TRUE(r.ok()) << r.error().message();
    if (!r.ok()) return "";
    drain();
    EXPECT_EQ(op(r->operation.id).state, OpState::kDone);
    return r->sandbox.id;
  }
  // Starts awaitOperation on the io thread; the result lands in `*out`.
  void startAwait(std::optional<Result<store::OperationRecord>>* out, const std::string& tenant,
                  const std::string& op_id, std::chrono::milliseconds limit) {
    out->reset();
    auto deadline = std::chrono::steady_clock::now() + limit;
    asio::co_spawn(
        io_,
        [this, out, tenant, op_id, deadline]() -> asio::awaitable<void> {
          *out = co_await lc_->awaitOperation(tenant, op_id, deadline);
        },
        asio::detached);
  }
  std::vector<std::string> eventTypes(const std::string& sandbox_id) {
    std::vector<std::string> out;
    auto ev = store_->listEvents("t1", "", 0, 1000);
    if (ev.ok())
      for (auto& e : *ev)
        if (e.sandbox_id == sandbox_id) out.push_back(e.type + ":" + e.data_json);
    return out;
  }

  std::string dir_;
  FakeWallClock clock_;
  asio::io_context io_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<templates::TemplateStore> templates_;
  std::unique_ptr<testing::FakeNode> node_;
  std::unique_ptr<Lifecycle> lc_;
};

TEST_F(LifecycleTest, CreatePauseResumeDelete) {
  std::string id = created();
  EXPECT_EQ(state(id), "running");
  auto p = lc_->pause("t1", id);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->sandbox.state, SandboxState::kPausing);
  drain();
  EXPECT_EQ(state(id), "paused");
  // Illegal in this state, and says so.
  auto again = lc_->pause("t1", id);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code(), Code::kFailedPrecondition);
  EXPECT_THAT(again.error().message(), HasSubstr("paused"));
  ASSERT_TRUE(lc_->resume("t1", id).ok());
  drain();
  EXPECT_EQ(state(id), "running");
  auto d = lc_->remove("t1", id);
  ASSERT_TRUE(d.ok());
  drain();
  EXPECT_EQ(op(d->operation.id).state, OpState::kDone);
  EXPECT_EQ(lc_->get("t1", id).error().code(), Code::kNotFound);
  EXPECT_EQ(node_->holding(id), Holding::kNothing);
}

TEST_F(LifecycleTest, AnotherTenantsSandboxIsAbsent) {
  std::string id = created();
  EXPECT_EQ(lc_->get("t2", id).error().code(), Code::kNotFound);
  EXPECT_EQ(lc_->remove("t2", id).error().code(), Code::kNotFound);
  EXPECT_EQ(state(id), "running");
}

TEST_F(LifecycleTest, DeleteWhileResumingCancelsTheResumeAndDestroys) {
  std::string id = created();
  ASSERT_TRUE(lc_->pause("t1", id).ok());
  drain();
  // The guest stops answering during the resume: without a delete it would
  // stay `resuming` until the node's own deadline.
  node_->hang.insert(id);
  auto r = lc_->resume("t1", id);
  ASSERT_TRUE(r.ok());
  drain();
  ASSERT_TRUE(node_->hanging(id));
  EXPECT_EQ(state(id), "resuming");
  auto d = lc_->remove("t1", id);
  ASSERT_TRUE(d.ok()) << d.error().message();
  drain();
  EXPECT_FALSE(node_->hanging(id));
  EXPECT_EQ(node_->count("abort " + id), 1);
  EXPECT_EQ(op(d->operation.id).state, OpState::kDone);
  auto resume_op = op(r->operation.id);
  EXPECT_EQ(resume_op.state, OpState::kFailed);
  EXPECT_THAT(resume_op.error_message, HasSubstr("cancelled"));
  EXPECT_EQ(state(id), "deleted");
  EXPECT_EQ(node_->holding(id), Holding::kNothing);
}

TEST_F(LifecycleTest, DeleteWhileCreatingWaitsForTheCreateToEnd) {
  CreateRequest c;
  c.tenant = "t1";
  auto r = lc_->create(c);
  ASSERT_TRUE(r.ok());
  std::string id = r->sandbox.id;
  node_->hang.insert(id);
  drain();
  ASSERT_TRUE(node_->hanging(id));
  auto d = lc_->remove("t1", id);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(state(id), "deleting");
  drain();
  EXPECT_EQ(state(id), "deleted");
  EXPECT_EQ(op(r->operation.id).state, OpState::kFailed);
  EXPECT_EQ(op(d->operation.id).state, OpState::kDone);
  EXPECT_EQ(node_->count("destroy " + id), 1);
}

TEST_F(LifecycleTest, DeletingAPausedSandboxNeverRestoresIt) {
  std::string id = created();
  ASSERT_TRUE(lc_->pause("t1", id).ok());
  drain();
  auto d = lc_->remove("t1", id);
  ASSERT_TRUE(d.ok()) << d.error().message();
  EXPECT_EQ(d->sandbox.state, SandboxState::kDeleting);
  drain();
  EXPECT_EQ(op(d->operation.id).state, OpState::kDone);
  EXPECT_EQ(node_->count("resume " + id), 0) << "a paused sandbox was restored to be deleted";
  EXPECT_EQ(node_->count("destroy " + id), 1);
}

TEST_F(LifecycleTest, ForkCopiesKeepTheirParentsExpiry) {
  CreateRequest c;
  c.lifetime_s = 100;
  std::string parent = created(c);
  auto p = lc_->get("t1", parent);
  ASSERT_TRUE(p.ok());
  clock_.advance(90s);  // near its end
  auto f = lc_->fork("t1", parent, 1);
  ASSERT_TRUE(f.ok()) << f.error().message();
  drain();
  ASSERT_EQ(f->copies.size(), 1u);
  std::string child = f->copies[0].id;
  EXPECT_EQ(state(child), "running");
  EXPECT_EQ(lc_->get("t1", child)->expires_ms, p->expires_ms);
  // A fork of the fork: still the first parent's end.
  auto g = lc_->fork("t1", child, 1);
  ASSERT_TRUE(g.ok());
  drain();
  std::string grandchild = g->copies[0].id;
  EXPECT_EQ(lc_->get("t1", grandchild)->expires_ms, p->expires_ms);
  clock_.advance(11s);
  EXPECT_EQ(lc_->reapOnce(), 3);
  drain();
  for (const auto& id : {parent, child, grandchild}) EXPECT_EQ(state(id), "deleted") << id;
}

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

TEST_F(LifecycleTest, TheReaperEndsAHungResumeAtItsLifetime) {
  CreateRequest c;
  c.lifetime_s = 60;
  std::string id = created(c);
  ASSERT_TRUE(lc_->pause("t1", id).ok());
  drain();
  node_->hang.insert(id);
  ASSERT_TRUE(lc_->resume("t1", id).ok());
  drain();
  EXPECT_EQ(lc_->reapOnce(), 0);  // not yet
  clock_.advance(61s);
  EXPECT_EQ(lc_->reapOnce(), 1);
  drain();
  EXPECT_EQ(state(id), "deleted");
  EXPECT_FALSE(node_->hanging(id));
}

TEST_F(LifecycleTest, TheReaperEndsIdleSandboxesByTheClock) {
  CreateRequest c;
  c.timeout_s = 30;
  std::string id = created(c);
  clock_.advance(20s);
  lc_->noteActivity(id);
  clock_.advance(20s);
  EXPECT_EQ(lc_->reapOnce(), 0) << "activity restarted its idle clock";
  clock_.advance(11s);
  EXPECT_EQ(lc_->reapOnce(), 1);
  drain();
  EXPECT_EQ(state(id), "deleted");
  bool expired = false;
  for (auto& e : eventTypes(id)) expired = expired || e.rfind("sandbox.expired", 0) == 0;
  EXPECT_TRUE(expired);
}

TEST_F(LifecycleTest, AwaitOperationAnswersWhenItEndsOrAtTheDeadline) {
  CreateRequest c;
  c.tenant = "t1";
  auto r = lc_->create(c);
  ASSERT_TRUE(r.ok());
  std::optional<Result<store::OperationRecord>> got;
  startAwait(&got, "t1", r->operation.id, 10s);
  drain();
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok());
  EXPECT_EQ((*got)->state, OpState::kDone);
  // One that cannot end in time: the deadline answers, with the state.
  std::string id = r->sandbox.id;
  ASSERT_TRUE(lc_->pause("t1", id).ok());
  drain();
  node_->hang.insert(id);
  auto res = lc_->resume("t1", id);
  ASSERT_TRUE(res.ok());
  startAwait(&got, "t1", res->operation.id, 50ms);
  io_.restart();
  for (int i = 0; i < 200 && !got; ++i) io_.run_one_for(20ms);
  ASSERT_TRUE(got.has_value());
  ASSERT_FALSE(got->ok());
  EXPECT_EQ(got->error().code(), Code::kDeadlineExceeded);
  EXPECT_THAT(got->error().message(), HasSubstr("running"));
  // Another tenant cannot wait on it.
  startAwait(&got, "t2", res->operation.id, 10s);
  drain();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->error().code(), Code::kNotFound);
}

TEST_F(LifecycleTest, QuotasRefuseWithWhatIsUsed) {
  Policy pol;
  pol.quota.max_sandboxes = 1;
  lc_->setPolicy(pol);
  created();
  CreateRequest c;
  c.tenant = "t1";
  auto r = lc_->create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), Code::kResourceExhausted);
  EXPECT_THAT(r.error().message(), HasSubstr("1 of at most 1"));
}

TEST_F(LifecycleTest, DiskSizeDefaultsToTheTemplatesAndIsBounded) {
  Policy pol;
  pol.max_disk_mib = 4096;
  lc_->setPolicy(pol);
  // No size asked: the template's default (kDefaultDiskMib here).
  std::string dflt = created();
  EXPECT_EQ((*store_->getSandbox("t1", dflt))->disk_mib, templates::kDefaultDiskMib);
  CreateRequest c;
  c.disk_mib = 512;
  std::string sized = created(c);
  EXPECT_EQ((*store_->getSandbox("t1", sized))->disk_mib, 512u);
  // Above the deployment's maximum, or below the template image: refused.
  c.tenant = "t1";
  c.disk_mib = 8192;
  auto big = lc_->create(c);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(big.error().message(), HasSubstr("and 4096 here"));
  {
    // A 96 MiB image (sparse): no disk may be smaller.
    installTemplate("big", 96 << 20);
    auto t = templates_->open("big");
    ASSERT_TRUE(t.ok()) << t.error().message();
    EXPECT_EQ((*t)->baseDiskMib(), 96u);
  }
  c.template_name = "big";
  c.disk_mib = 64;
  auto small = lc_->create(c);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.error().code(), Code::kInvalidArgument);
  EXPECT_THAT(small.error().message(), HasSubstr("between 96 (template 'big')"));
}

TEST_F(LifecycleTest, DiskAndVcpuQuotasCountSandboxesPauseSnapshotsAndTemplates) {
  Policy pol;
  pol.quota.max_disk_mib = 3000;
  lc_->setPolicy(pol);
  CreateRequest c;
  c.disk_mib = 1024;
  std::string a = created(c);
  // Paused: its disk and its saved memory (256 MiB) count.
  ASSERT_TRUE(lc_->pause("t1", a).ok());
  drain();
  ASSERT_EQ(state(a), "paused");
  EXPECT_EQ(store_->tenantUsage("t1")->disk_mib, 1024 + 256);
  created(c);  // 2304 MiB now
  c.tenant = "t1";
  c.disk_mib = 1000;
  auto over = lc_->create(c);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code(), Code::kResourceExhausted);
  EXPECT_THAT(over.error().message(), HasSubstr("take 2304 MiB of at most 3000 MiB"));
  // The tenant's templates take the node's disk too: 100 MiB of one makes
  // a 650 MiB disk, which fits without it, not fit.
  c.disk_mib = 650;
  {
    std::string stored = templates::tenantTemplateName("t1", "mine");
    installTemplate(stored);
    auto t = templates_->open(stored);
    ASSERT_TRUE(t.ok());
    std::ofstream(t->get()->path(templates::kMemoryFile)) << std::string(100 << 20, 'm');
  }
  uint64_t tmpl_mib = templates_->allocatedMib(templates::tenantTemplateName("t1", ""));
  EXPECT_GE(tmpl_mib, 100u);
  auto tmpl = lc_->create(c);
  ASSERT_FALSE(tmpl.ok());
  EXPECT_THAT(tmpl.error().message(), HasSubstr("take " + std::to_string(2304 + tmpl_mib)));
  // Another tenant is not charged for them.
  c.tenant = "t2";
  EXPECT_TRUE(lc_->create(c).ok());
  drain();

  // vCPUs of running sandboxes: one each here.
  Policy cpu;
  cpu.quota.max_vcpus = 1;
  lc_->setPolicy(cpu);
  c.tenant = "t1";
  auto no_cpu = lc_->create(c);
  ASSERT_FALSE(no_cpu.ok());
  EXPECT_THAT(no_cpu.error().message(), HasSubstr("1 of at most 1 vCPUs"));
}

TEST_F(LifecycleTest, ALowStateDiskRefusesCreatesPausesAndForks) {
  std::string id = created();
  Policy pol;
  pol.state_dir = dir_;
  pol.min_free_disk_mib = uint64_t{1} << 40;  // more than any disk here has
  lc_->setPolicy(pol);
  CreateRequest c;
  c.tenant = "t1";
  auto refused = [&](const Result<Accepted>& r) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code(), Code::kResourceExhausted);
    EXPECT_THAT(r.error().message(), HasSubstr("refused: the state disk is nearly full (" + dir_));
  };
  refused(lc_->create(c));
  refused(lc_->pause("t1", id));
  refused(lc_->fork("t1", id, 1));
  EXPECT_EQ(state(id), "running");
  pol.min_free_disk_mib = 1;
  lc_->setPolicy(pol);
  EXPECT_TRUE(lc_->pause("t1", id).ok());
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

TEST_F(LifecycleTest, StoreTimestampsComeFromTheInjectedClock) {
  std::string id = created();
  int64_t t0 = clock_.nowMs();
  clock_.advance(5s);
  ASSERT_TRUE(lc_->pause("t1", id).ok());
  drain();
  auto sb = lc_->get("t1", id);
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(sb->updated_ms, t0 + 5000);
  EXPECT_THAT(state(id), Not("running"));
}

TEST_F(LifecycleTest, ListsByCreationWithFiltersAndStablePages) {
  installTemplate("other");
  std::vector<std::string> ids;  // oldest first
  for (int i = 0; i < 5; ++i) {
    CreateRequest c;
    c.metadata_json = i % 2 ? R"({"k":"odd"})" : R"({"k":"even"})";
    if (i == 4) c.template_name = "other";
    ids.push_back(created(c));
    clock_.advance(1s);
  }
  int64_t third = lc_->get("t1", ids[2])->created_ms;
  ASSERT_TRUE(lc_->pause("t1", ids[1]).ok());
  drain();
  auto page = [&](ListRequest r) {
    r.tenant = "t1";
    if (r.order == ListRequest::Order::kById) r.order = ListRequest::Order::kNewestFirst;
    std::vector<std::string> got;
    auto p = lc_->list(r);
    EXPECT_TRUE(p.ok()) << p.error().message();
    if (p.ok())
      for (auto& s : p->sandboxes) got.push_back(s.id);
    return std::pair{got, p.ok() ? p->next_page_token : "?"};
  };
  ListRequest all;
  all.page_size = 2;
  auto [p1, t1] = page(all);
  EXPECT_EQ(p1, (std::vector<std::string>{ids[4], ids[3]}));
  // A sandbox created between pages sorts before them and shifts nothing.
  std::string later = created();
  all.page_token = t1;
  auto [p2, t2] = page(all);
  EXPECT_EQ(p2, (std::vector<std::string>{ids[2], ids[1]}));
  all.page_token = t2;
  auto [p3, t3] = page(all);
  EXPECT_EQ(p3, (std::vector<std::string>{ids[0]}));
  EXPECT_EQ(t3, "");
  ListRequest f;
  f.page_size = 10;
  f.metadata = {{"k", "even"}};
  f.created_after_ms = third;
  EXPECT_EQ(page(f).first, (std::vector<std::string>{ids[4], ids[2]}));
  f.template_name = "other";
  EXPECT_EQ(page(f).first, (std::vector<std::string>{ids[4]}));
  ListRequest st;
  st.states = {SandboxState::kPaused};
  EXPECT_EQ(page(st).first, (std::vector<std::string>{ids[1]}));
  st.states = {SandboxState::kPaused, SandboxState::kRunning};
  EXPECT_EQ(page(st).first.size(), 6u);
  EXPECT_EQ(page(st).first.front(), later);
  // Oldest first, paged the same way; the one made meanwhile comes last.
  ListRequest asc;
  asc.order = ListRequest::Order::kOldestFirst;
  asc.page_size = 4;
  auto [a1, at1] = page(asc);
  EXPECT_EQ(a1, (std::vector<std::string>{ids[0], ids[1], ids[2], ids[3]}));
  asc.page_token = at1;
  EXPECT_EQ(page(asc).first, (std::vector<std::string>{ids[4], later}));
  ListRequest bad;
  bad.tenant = "t1";
  bad.order = ListRequest::Order::kNewestFirst;
  bad.page_token = "sb-nosuchthing";
  EXPECT_EQ(lc_->list(bad).error().code(), Code::kInvalidArgument);
}

TEST_F(LifecycleTest, ExtendAtLeastOnlyEverLengthensUpToTheCap) {
  lc_->setPolicy(Policy{.max_lifetime_s = 1000});
  CreateRequest c;
  c.timeout_s = 0;
  c.lifetime_s = 100;
  std::string id = created(c);
  int64_t t0 = clock_.nowMs();
  auto same = lc_->extendAtLeast("t1", id, 50);  // shorter: kept as it is
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->expires_ms, t0 + 100'000);
  clock_.advance(30s);
  auto longer = lc_->extendAtLeast("t1", id, 300);
  ASSERT_TRUE(longer.ok());
  EXPECT_EQ(longer->expires_ms, t0 + 330'000);
  EXPECT_EQ(longer->idle_timeout_s, 0);
  auto capped = lc_->extendAtLeast("t1", id, 5000);  // clamped at creation + max
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->expires_ms, t0 + 1000'000);
  EXPECT_EQ(lc_->extendAtLeast("t2", id, 10).error().code(), Code::kNotFound);
}

TEST_F(LifecycleTest, SetNetworkGoesToTheNodeForLiveSandboxesOnly) {
  std::string id = created();
  NetworkSpec spec;
  spec.mode = "allowlist";
  spec.allow = {"example.com"};
  ASSERT_TRUE(runBlocking(io_, lc_->setNetwork("t1", id, spec)).ok());
  EXPECT_EQ(node_->count("update-network " + id + " allowlist"), 1);
  spec.mode = "bogus";
  EXPECT_EQ(runBlocking(io_, lc_->setNetwork("t1", id, spec)).error().code(),
            Code::kInvalidArgument);
  spec.mode = "none";
  EXPECT_EQ(runBlocking(io_, lc_->setNetwork("t2", id, spec)).error().code(), Code::kNotFound);
  ASSERT_TRUE(lc_->remove("t1", id).ok());
  drain();
  EXPECT_EQ(runBlocking(io_, lc_->setNetwork("t1", id, spec)).error().code(), Code::kNotFound);
  EXPECT_EQ(node_->count("update-network"), 1);
}

TEST_F(LifecycleTest, NetworkSettingsAreReadAndAnsweredAsTheNodeStoresThem) {
  CreateRequest c;
  c.network = NetworkSpec{.mode = "allowlist", .allow = {"a.test"}};
  std::string id = created(c);
  auto now = lc_->network("t1", id);
  ASSERT_TRUE(now.ok()) << now.error().message();
  EXPECT_EQ(now->allow, std::vector<std::string>{"a.test"});
  auto set =
      runBlocking(io_, lc_->setNetwork("t1", id, NetworkSpec{}));  // empty mode: the node's default
  ASSERT_TRUE(set.ok()) << set.error().message();
  EXPECT_EQ(set->mode, "none");
  EXPECT_EQ(lc_->network("t1", id)->mode, "none");
  EXPECT_EQ(lc_->network("t2", id).error().code(), Code::kNotFound);
}

TEST_F(LifecycleTest, CredentialChangesReachTheNode) {
  CredentialSpec c{"gh", {"api.github.com"}, "Authorization", "Bearer 0123456789abcdef"};
  auto put = lc_->putCredential("t1", c);
  ASSERT_TRUE(put.ok()) << put.error().message();
  EXPECT_EQ(put->hosts_json, R"(["api.github.com"])");
  EXPECT_EQ(put->created_ms, clock_.nowMs());
  EXPECT_EQ(node_->count("credential-changed t1 gh"), 1);
  c.value = "Bearer fedcba9876543210";  // a new value replaces the old one
  ASSERT_TRUE(lc_->putCredential("t1", c).ok());
  EXPECT_EQ(node_->count("credential-changed t1 gh"), 2);
  auto list = lc_->listCredentials("t1");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->front().value, c.value);
  EXPECT_TRUE(lc_->listCredentials("t2")->empty());
  // Another tenant's credential is absent; nothing reaches the node.
  EXPECT_EQ(lc_->deleteCredential("t2", "gh").error().code(), Code::kNotFound);
  EXPECT_EQ(node_->count("credential-changed"), 2);
  ASSERT_TRUE(lc_->deleteCredential("t1", "gh").ok());
  EXPECT_EQ(node_->count("credential-changed t1 gh"), 3);
  EXPECT_TRUE(lc_->listCredentials("t1")->empty());
}

TEST_F(LifecycleTest, UsageOfRunningSandboxesOnly) {
  std::string id = created();
  auto u = runBlocking(io_, lc_->usage("t1", id));
  ASSERT_TRUE(u.ok()) << u.error().message();
  EXPECT_EQ(u->cpu_count, 1u);
  EXPECT_DOUBLE_EQ(u->cpu_used_pct, 12.5);
  EXPECT_EQ(u->mem_total_bytes, 256ull << 20);  // the sandbox's shape, not the node's guess
  EXPECT_EQ(u->mem_used_bytes, 100ull << 20);
  node_->fake_usage.cpu_used_pct = 250;  // host CPUs: capped at all of its vCPUs
  node_->fake_usage.mem_used_bytes = 1ull << 40;
  EXPECT_DOUBLE_EQ(runBlocking(io_, lc_->usage("t1", id))->cpu_used_pct, 100);
  EXPECT_EQ(runBlocking(io_, lc_->usage("t1", id))->mem_used_bytes, 256ull << 20);
  EXPECT_EQ(runBlocking(io_, lc_->usage("t2", id)).error().code(), Code::kNotFound);
  ASSERT_TRUE(lc_->pause("t1", id).ok());
  drain();
  EXPECT_EQ(runBlocking(io_, lc_->usage("t1", id)).error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(node_->count("usage"), 3);
}

TEST_F(LifecycleTest, ABuildReportsProgressThenTheTemplateAsAnOperation) {
  templates::BuildSpec spec;
  spec.name = "py";
  auto op = lc_->buildTemplate("t1", spec);
  ASSERT_TRUE(op.ok()) << op.error().message();
  EXPECT_EQ(op->kind, "build");
  std::string stored = templates::tenantTemplateName("t1", "py");
  EXPECT_EQ(node_->count("build " + stored + " from minimal"), 1);
  drain();
  EXPECT_EQ(this->op(op->id).state, OpState::kDone);
  std::vector<std::string> types;
  auto ev = store_->listEvents("t1", "", 0, 1000);
  ASSERT_TRUE(ev.ok());
  for (auto& e : *ev)
    if (e.operation_id == op->id) types.push_back(e.type + ":" + e.data_json);
  // Progress, then the template, then the operation's end; in the tenant's
  // names (the stored one never shows).
  auto at = [&](const std::string& type) {
    for (size_t i = 0; i < types.size(); ++i)
      if (types[i].rfind(type + ":", 0) == 0) return static_cast<int>(i);
    return -1;
  };
  ASSERT_GE(at("template.progress"), 0);
  EXPECT_THAT(types[at("template.progress")], HasSubstr(R"("template":"py")"));
  ASSERT_GT(at("template.built"), at("template.progress"));
  EXPECT_THAT(types[at("template.built")], HasSubstr(R"("name":"py")"));
  EXPECT_GT(at("operation.done"), at("template.built"));
  for (const auto& t : types) EXPECT_THAT(t, Not(HasSubstr(stored))) << t;
}

TEST_F(LifecycleTest, AFailedBuildFailsItsOperationInTheTenantsNames) {
  std::string stored = templates::tenantTemplateName("t1", "py");
  node_->fail_build.insert(stored);
  templates::BuildSpec spec;
  spec.name = "py";
  auto op = lc_->buildTemplate("t1", spec);
  ASSERT_TRUE(op.ok()) << op.error().message();
  drain();
  auto done = this->op(op->id);
  EXPECT_EQ(done.state, OpState::kFailed);
  EXPECT_THAT(done.error_message, HasSubstr("build py: the ready check never passed"));
  EXPECT_THAT(done.error_message, Not(HasSubstr(stored)));
}

TEST_F(LifecycleTest, BuildsAreRefusedBeforeOrWhenTheNodeCannotTakeThem) {
  templates::BuildSpec spec;
  spec.name = "minimal";  // built in
  EXPECT_EQ(lc_->buildTemplate("t1", spec).error().code(), Code::kAlreadyExists);
  spec.name = "py";
  spec.base = "nosuch";
  EXPECT_EQ(lc_->buildTemplate("t1", spec).error().code(), Code::kNotFound);
  EXPECT_EQ(node_->count("build"), 0);
  spec.base = "minimal";
  node_->builds_full = true;
  EXPECT_EQ(lc_->buildTemplate("t1", spec).error().code(), Code::kResourceExhausted);
  auto ops = store_->listUnfinishedOperations();
  ASSERT_TRUE(ops.ok());
  EXPECT_TRUE(ops->empty());  // the refused build's operation failed at once
}

TEST_F(LifecycleTest, BuildsInFlightFailAtShutdown) {
  templates::BuildSpec spec;
  spec.name = "py";
  auto op = lc_->buildTemplate("t1", spec);
  ASSERT_TRUE(op.ok());
  asio::co_spawn(io_, lc_->shutdown(), asio::detached);
  drain();
  auto o = this->op(op->id);
  EXPECT_EQ(o.state, OpState::kFailed);
  EXPECT_THAT(o.error_message, HasSubstr("stopped during the build"));
}

}  // namespace
}  // namespace vessel::ops
