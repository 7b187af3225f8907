// The lifecycle's actions against a fake node, a real SQLite store and a
// fake clock: create, pause, resume, fork and delete in every state, what
// an operation answers, extend, usage and wake.
#include "ops/testing/lifecycle_fixture.h"

namespace vessel::ops {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;
using LifecycleTest = testing::LifecycleTest;

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
  EXPECT_EQ(lc_->reaper().reapOnce(), 3);
  drain();
  for (const auto& id : {parent, child, grandchild}) EXPECT_EQ(state(id), "deleted") << id;
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

// wake(): the hook the sandbox-ports ingress calls with traffic for a sandbox.
TEST_F(LifecycleTest, WakeResumesAutoResumeSandboxesOnly) {
  auto wake = [&](const std::string& id, std::optional<Status>* out,
                  std::chrono::milliseconds limit = 10s) {
    out->reset();
    asio::co_spawn(
        io_,
        [this, id, out, limit]() -> asio::awaitable<void> {
          *out = co_await lc_->wake(id, std::chrono::steady_clock::now() + limit);
        },
        asio::detached);
  };
  CreateRequest c;
  c.lifetime_s = 60;
  c.pause_on_timeout = true;
  c.auto_resume = true;
  std::string id = created(c);
  std::optional<Status> a, b;
  wake(id, &a);
  drain();
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->ok()) << "running: at once";
  EXPECT_EQ(node_->count("resume " + id), 0);

  clock_.advance(61s);
  ASSERT_EQ(lc_->reaper().reapOnce(), 1);
  drain();
  ASSERT_EQ(state(id), "paused");
  clock_.advance(100s);
  wake(id, &a);
  wake(id, &b);  // traffic on two connections: one resume
  drain();
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_TRUE(a->ok()) << a->error().message();
  EXPECT_TRUE(b->ok()) << b->error().message();
  EXPECT_EQ(state(id), "running");
  EXPECT_EQ(node_->count("resume " + id), 1);
  EXPECT_EQ(lc_->get("t1", id)->expires_ms, clock_.nowMs() + 60'000) << "a fresh lifetime";

  // A wake that arrives while it is pausing waits for the pause, then resumes.
  ASSERT_TRUE(lc_->pause("t1", id).ok());
  wake(id, &a);
  drain();
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->ok()) << a->error().message();
  EXPECT_EQ(state(id), "running");
  EXPECT_EQ(node_->count("resume " + id), 2);

  // A resume that never ends: the wake gives up at its deadline.
  ASSERT_TRUE(lc_->pause("t1", id).ok());
  drain();
  node_->hang.insert(id);
  wake(id, &a, 50ms);
  drain();
  EXPECT_FALSE(a.has_value());
  while (!a.has_value()) io_.run_one();
  EXPECT_EQ(a->error().code(), Code::kDeadlineExceeded);
  ASSERT_TRUE(lc_->remove("t1", id).ok());  // cuts the hung resume short
  drain();

  // Paused without auto-resume, unknown, deleted: errors.
  std::string plain = created();
  ASSERT_TRUE(lc_->pause("t1", plain).ok());
  drain();
  wake(plain, &a);
  drain();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(state(plain), "paused");
  wake("sb-nosuchthing", &a);
  drain();
  EXPECT_EQ(a->error().code(), Code::kNotFound);
  wake(id, &a);
  drain();
  EXPECT_EQ(a->error().code(), Code::kNotFound);
}

}  // namespace
}  // namespace vessel::ops
