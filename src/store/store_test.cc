#include "store/store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "store/store_test.h"

// The store's behaviour, once, for both engines: every TEST_P runs against
// SQLite (a file) and PostgreSQL (a real server in a private directory,
// one per test binary, a fresh database per test). What only one engine
// has (SQLite's legacy user_version, PostgreSQL's reconnect) is tested in
// its own fixture (store_upgrade_test.cc), with the upgrade of databases
// made by earlier versions.

namespace vessel::store {
namespace {
// The test binary's PostgreSQL server, started on first use and stopped
// by the environment below (or, failing that, by its destructor at exit).
std::unique_ptr<testing::PostgresServer>& pgSlot() {
  static std::unique_ptr<testing::PostgresServer> server;
  return server;
}
}  // namespace
testing::PostgresServer* pgServer(std::string* why) {
  static std::string failure;
  if (!pgSlot() && failure.empty()) {
    auto s = testing::PostgresServer::start();
    if (s.ok()) {
      pgSlot() = std::move(*s);
    } else {
      failure = s.error().message();
    }
  }
  if (why) *why = failure;
  return pgSlot().get();
}
namespace {
class StopPostgres : public ::testing::Environment {
 public:
  void TearDown() override { pgSlot().reset(); }
};
[[maybe_unused]] auto* const kStopPostgres = ::testing::AddGlobalTestEnvironment(new StopPostgres);

std::string engineName(const ::testing::TestParamInfo<Engine>& p) {
  return p.param == Engine::kSqlite ? "Sqlite" : "Postgres";
}
INSTANTIATE_TEST_SUITE_P(Engines, StoreTest, ::testing::Values(Engine::kSqlite, Engine::kPostgres),
                         engineName);

TEST_P(StoreTest, MigratesAndPersists) {
  {
    auto s = open();
    ASSERT_TRUE(s.ok()) << s.error().message();
    EXPECT_EQ((*s)->schemaVersion(), 20);
    ASSERT_TRUE((*s)->setMeta("instance_id", "abc").ok());
    ASSERT_TRUE((*s)->setMeta("instance_id", "def").ok());
    // The first value set stays.
    EXPECT_EQ((*s)->getOrSetMeta("key_once", "first").value_or(""), "first");
    EXPECT_EQ((*s)->getOrSetMeta("key_once", "second").value_or(""), "first");
  }
  auto s = open();
  ASSERT_TRUE(s.ok());
  auto v = (*s)->getMeta("instance_id");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->value_or(""), "def");
  EXPECT_FALSE((*s)->getMeta("missing")->has_value());
}

TEST_P(StoreTest, EveryQueryIsScopedToItsTenant) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  ASSERT_TRUE(st.createTenant("t2", "two").ok());
  EXPECT_EQ(st.createTenant("t1", "again").error().code(), Code::kAlreadyExists);
  ASSERT_TRUE(st.addApiKey("t1", "hash1").ok());
  EXPECT_EQ(st.tenantForKey("hash1")->value_or(""), "t1");
  EXPECT_FALSE(st.tenantForKey("hash2")->has_value());

  SandboxRecord a{"sb-a", "t1", "minimal", SandboxState::kRunning};
  SandboxRecord b{"sb-b", "t2", "minimal", SandboxState::kRunning};
  ASSERT_TRUE(st.insertSandbox(a).ok());
  ASSERT_TRUE(st.insertSandbox(b).ok());
  EXPECT_TRUE(st.getSandbox("t1", "sb-a")->has_value());
  EXPECT_FALSE(st.getSandbox("t2", "sb-a")->has_value());
  auto l1 = st.listSandboxes("t1", "", 10);
  ASSERT_TRUE(l1.ok());
  ASSERT_EQ(l1->size(), 1u);
  EXPECT_EQ((*l1)[0].id, "sb-a");

  OperationRecord o{"op-1", "t1", "sb-a", "create", OpState::kPending};
  ASSERT_TRUE(st.insertOperation(o).ok());
  EXPECT_FALSE(st.getOperation("t2", "op-1")->has_value());
  ASSERT_TRUE(st.setOperationState("op-1", OpState::kFailed, "internal", "boom").ok());
  EXPECT_EQ((*st.getOperation("t1", "op-1"))->error_message, "boom");

  EventRecord e1{0, "t1", "op-1", "sb-a", "operation.running"};
  EventRecord e2{0, "t2", "op-2", "sb-b", "operation.running"};
  EventRecord e3{0, "t1", "op-9", "sb-a", "operation.done"};
  auto s1 = st.appendEvent(e1);
  ASSERT_TRUE(s1.ok());
  ASSERT_TRUE(st.appendEvent(e2).ok());
  auto s3 = st.appendEvent(e3);
  ASSERT_TRUE(s3.ok());
  EXPECT_LT(*s1, *s3);
  auto all = st.listEvents("t1", "", 0, 100);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].seq, *s3);
  EXPECT_EQ(st.listEvents("t1", "op-1", 0, 100)->size(), 1u);
  EXPECT_EQ(st.listEvents("t1", "", *s1, 100)->size(), 1u);
}

TEST_P(StoreTest, RecoveryListsLiveSandboxesAndUnfinishedOperations) {
  auto s = open();
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  SandboxRecord a{"sb-a", "t1", "minimal", SandboxState::kCreating};
  SandboxRecord p{"sb-p", "t1", "minimal", SandboxState::kPaused};
  SandboxRecord f{"sb-f", "t1", "minimal", SandboxState::kFailed};
  for (auto* r : {&a, &p, &f}) ASSERT_TRUE(st.insertSandbox(*r).ok());
  OperationRecord o1{"op-1", "t1", "sb-a", "create", OpState::kRunning};
  OperationRecord o2{"op-2", "t1", "sb-p", "pause", OpState::kDone};
  ASSERT_TRUE(st.insertOperation(o1).ok());
  ASSERT_TRUE(st.insertOperation(o2).ok());
  auto live = st.listLiveSandboxes();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 2u);
  EXPECT_EQ((*live)[0].id, "sb-a");
  EXPECT_EQ((*live)[1].id, "sb-p");
  auto ops = st.listUnfinishedOperations();
  ASSERT_TRUE(ops.ok());
  ASSERT_EQ(ops->size(), 1u);
  EXPECT_EQ((*ops)[0].id, "op-1");
}

TEST_P(StoreTest, SessionsAreFoundByHashRevokedAndExpired) {
  auto s = open();
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  SandboxRecord a{"sb-a", "t1", "minimal", SandboxState::kRunning};
  SandboxRecord b{"sb-b", "t1", "minimal", SandboxState::kRunning};
  ASSERT_TRUE(st.insertSandbox(a).ok());
  ASSERT_TRUE(st.insertSandbox(b).ok());
  ASSERT_TRUE(st.insertSession({"h1", "t1", "sb-a", 1, 1000}).ok());
  ASSERT_TRUE(st.insertSession({"h2", "t1", "sb-a", 1, 5000}).ok());
  ASSERT_TRUE(st.insertSession({"h3", "t1", "sb-b", 1, 500}).ok());
  EXPECT_EQ(st.insertSession({"h1", "t1", "sb-b", 1, 1000}).error().code(), Code::kAlreadyExists);
  // A session must name a sandbox and tenant that exist.
  EXPECT_FALSE(st.insertSession({"h9", "t1", "sb-none", 1, 1000}).ok());
  auto got = st.sessionForToken("h1");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->sandbox_id, "sb-a");
  EXPECT_EQ((*got)->tenant_id, "t1");
  EXPECT_EQ((*got)->expires_ms, 1000);
  EXPECT_FALSE(st.sessionForToken("nope")->has_value());
  EXPECT_EQ(st.deleteExpiredSessions(600).value_or(-1), 1);
  EXPECT_FALSE(st.sessionForToken("h3")->has_value());
  EXPECT_EQ(st.revokeSessions("sb-a").value_or(-1), 2);
  EXPECT_FALSE(st.sessionForToken("h1")->has_value());
  EXPECT_FALSE(st.sessionForToken("h2")->has_value());
}

TEST_P(StoreTest, LimitsUsageAndExpiry) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  ASSERT_TRUE(st.setTenantLimits("t1", {3, 1024}).ok());
  EXPECT_EQ(st.tenantLimits("t1")->max_sandboxes.value_or(0), 3);
  EXPECT_EQ(st.tenantLimits("t1")->max_memory_mib.value_or(0), 1024);
  EXPECT_EQ(st.setTenantLimits("nope", {}).error().code(), Code::kNotFound);

  SandboxRecord run{"sb-run", "t1", "minimal", SandboxState::kRunning, "", 1, 256};
  run.idle_timeout_s = 10;
  run.last_active_ms = 1000;
  SandboxRecord paused{"sb-paused", "t1", "minimal", SandboxState::kPaused, "", 1, 512};
  paused.idle_timeout_s = 10;
  paused.expires_ms = 50000;
  SandboxRecord failed{"sb-failed", "t1", "minimal", SandboxState::kFailed, "x", 1, 128};
  for (auto* r : {&run, &paused, &failed}) ASSERT_TRUE(st.insertSandbox(*r).ok());
  auto u = st.tenantUsage("t1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->sandboxes, 2);
  EXPECT_EQ(u->memory_mib, 256);

  // Idle applies to running sandboxes only; the hard deadline to any.
  EXPECT_TRUE(st.listExpired(10999, 10)->empty());
  auto e = st.listExpired(11000, 10);
  ASSERT_EQ(e->size(), 1u);
  EXPECT_EQ((*e)[0].id, "sb-run");
  ASSERT_TRUE(st.touchSandbox("sb-run", 20000).ok());
  ASSERT_TRUE(st.touchSandbox("sb-run", 5000).ok());  // never moves back
  EXPECT_TRUE(st.listExpired(29999, 10)->empty());
  e = st.listExpired(50000, 10);
  ASSERT_EQ(e->size(), 2u);
  EXPECT_EQ((*e)[0].id, "sb-paused");
  ASSERT_TRUE(st.setSandboxLifetime("sb-paused", 10, 0).ok());
  EXPECT_EQ(st.listExpired(50000, 10)->size(), 1u);

  EXPECT_EQ(st.listLiveSandboxes()->size(), 2u);
  auto by = st.countSandboxesByState();
  ASSERT_TRUE(by.ok());
  EXPECT_EQ(by->size(), 3u);
}

TEST_P(StoreTest, CredentialsAndSandboxNetwork) {
  auto s = open();
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->useCredentialKey(std::string(32, 'k')).ok());
  ASSERT_TRUE((*s)->createTenant("t1", "one").ok());
  ASSERT_TRUE((*s)->createTenant("t2", "two").ok());
  CredentialRecord c{"t1", "gh", {"api.a.test"}, "Authorization", "Bearer x", 1};
  ASSERT_TRUE((*s)->putCredential(c).ok());
  c.value = "Bearer y";  // a second put replaces
  ASSERT_TRUE((*s)->putCredential(c).ok());
  auto got = (*s)->getCredential("t1", "gh");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->value, "Bearer y");
  EXPECT_FALSE((*s)->getCredential("t2", "gh")->has_value());  // tenant-scoped
  EXPECT_EQ((*s)->listCredentials("t1")->size(), 1u);
  EXPECT_TRUE((*s)->listCredentials("t2")->empty());
  ASSERT_TRUE((*s)->deleteCredential("t1", "gh").ok());
  EXPECT_FALSE((*s)->getCredential("t1", "gh")->has_value());

  EXPECT_FALSE((*s)->getSandboxNetwork("sb-1")->has_value());
  NetworkSettings n{"allowlist", {"a.test", "*.b.test:443"}, {"gh"}, {"a.test"}, {"10.0.0.0/8"}};
  ASSERT_TRUE((*s)->setSandboxNetwork("sb-1", n).ok());
  auto back = (*s)->getSandboxNetwork("sb-1");
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ(**back, n);
  n.mode = "none";  // a second set replaces
  ASSERT_TRUE((*s)->setSandboxNetwork("sb-1", n).ok());
  EXPECT_EQ((*s)->getSandboxNetwork("sb-1")->value_or(NetworkSettings{}).mode, "none");
}

TEST_P(StoreTest, TimestampsComeFromTheInjectedClock) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  ASSERT_TRUE(st.insertSandbox({"sb-a", "t1", "minimal", SandboxState::kCreating}).ok());
  ASSERT_TRUE(st.insertOperation({"op-1", "t1", "sb-a", "create"}).ok());
  clock_.set(1'900'000'000'123);
  ASSERT_TRUE(st.setSandboxState("sb-a", SandboxState::kRunning, "").ok());
  ASSERT_TRUE(st.setOperationState("op-1", OpState::kDone, "", "").ok());
  EXPECT_EQ((*st.getSandbox("t1", "sb-a"))->updated_ms, 1'900'000'000'123);
  EXPECT_EQ((*st.getOperation("t1", "op-1"))->updated_ms, 1'900'000'000'123);
  clock_.advance(std::chrono::milliseconds(5));
  auto seq = st.appendEvent({0, "t1", "op-1", "sb-a", "operation.done"});
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ((*st.listEvents("t1", "", 0, 10))[0].at_ms, 1'900'000'000'128);
}

// An operation ends once: of two writers ending it (the replica that ran
// it, and another that gave it up for lost) the first one's outcome stays.
TEST_P(StoreTest, FinishedOperationsNeverChange) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  ASSERT_TRUE(st.insertOperation({"op-1", "t1", "sb-a", "create"}).ok());
  ASSERT_TRUE(st.setOperationState("op-1", OpState::kRunning, "", "").ok());
  ASSERT_TRUE(st.setOperationState("op-1", OpState::kFailed, "unavailable", "node lost").ok());
  auto late = st.setOperationState("op-1", OpState::kDone, "", "");
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code(), Code::kFailedPrecondition);
  auto op = st.getOperation("t1", "op-1");
  ASSERT_TRUE(op.ok() && op->has_value());
  EXPECT_EQ((*op)->state, OpState::kFailed);
  EXPECT_EQ((*op)->error_message, "node lost");
  EXPECT_FALSE(st.setOperationState("op-none", OpState::kDone, "", "").ok());
}

// SSE clients follow events by sequence number ("after N"): with several
// writers (replicas), a number must never become visible after a higher
// one, or a reader that moved past it never sees it.
TEST_P(StoreTest, EventsBecomeVisibleInSequenceOrder) {
  constexpr int kWriters = 3, kEach = 200;
  std::vector<std::unique_ptr<Store>> writers;
  for (int i = 0; i < kWriters; ++i) {
    auto s = open();
    ASSERT_TRUE(s.ok()) << s.error().message();
    writers.push_back(std::move(*s));
  }
  auto reader = open();
  ASSERT_TRUE(reader.ok());
  std::atomic<bool> writing{true};
  std::atomic<int> failures{0};
  std::set<int64_t> seen;
  int64_t cursor = 0;
  auto follow = [&] {
    for (;;) {
      auto batch = (*reader)->listEvents("t1", "", cursor, 100);
      if (!batch.ok()) {
        ++failures;
        return;
      }
      for (const auto& e : *batch) {
        seen.insert(e.seq);
        cursor = e.seq;
      }
      if (batch->empty()) return;
    }
  };
  std::thread follower([&] {
    while (writing.load()) follow();
  });
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w)
    threads.emplace_back([&, w] {
      for (int i = 0; i < kEach; ++i)
        if (!writers[w]->appendEvent({0, "t1", "op-" + std::to_string(w), "sb", "x"}).ok())
          ++failures;
    });
  for (auto& t : threads) t.join();
  writing = false;
  follower.join();
  follow();  // whatever committed after the follower's last look
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(seen.size(), static_cast<size_t>(kWriters * kEach))
      << "the follower skipped events that became visible after a higher sequence number";
}

// The admission a create makes: the check sees the tenant's limits and
// usage, and a refusal inserts nothing.
TEST_P(StoreTest, AdmittedInsertsSeeLimitsAndUsage) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  ASSERT_TRUE(st.setTenantLimits("t1", {2, std::nullopt}).ok());
  ASSERT_TRUE(st.insertSandbox({"sb-a", "t1", "minimal", SandboxState::kPaused, "", 1, 512}).ok());
  TenantLimits seen_limits;
  TenantUsage seen_use;
  auto admit = [&](const TenantLimits& l, const TenantUsage& u) -> std::optional<Error> {
    seen_limits = l;
    seen_use = u;
    if (u.sandboxes + 1 > l.max_sandboxes.value_or(100))
      return Error(Code::kResourceExhausted, "full");
    return std::nullopt;
  };
  SandboxRecord b{"sb-b", "t1", "minimal", SandboxState::kCreating, "", 1, 256};
  ASSERT_TRUE(st.insertSandboxAdmitted(b, admit).ok());
  EXPECT_EQ(seen_limits.max_sandboxes.value_or(0), 2);
  EXPECT_FALSE(seen_limits.max_memory_mib.has_value());
  EXPECT_EQ(seen_use.sandboxes, 1);
  EXPECT_EQ(seen_use.memory_mib, 0);  // paused: holds no memory
  SandboxRecord c{"sb-c", "t1", "minimal", SandboxState::kCreating, "", 1, 256};
  auto refused = st.insertSandboxAdmitted(c, admit);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code(), Code::kResourceExhausted);
  EXPECT_EQ(seen_use.sandboxes, 2);
  EXPECT_EQ(seen_use.memory_mib, 256);
  EXPECT_FALSE(st.getSandbox("t1", "sb-c")->has_value());
  EXPECT_EQ(st.insertSandboxAdmitted(b, [](auto&, auto&) { return std::nullopt; }).error().code(),
            Code::kAlreadyExists);
  EXPECT_EQ(st.tenantUsage("t1")->sandboxes, 2);
  // The store is usable after a refusal (its transaction was ended).
  ASSERT_TRUE(st.setMeta("after", "refusal").ok());
}

// Several writers (API replicas, each its own connection) race for a
// tenant's last slots: exactly the limit is admitted.
TEST_P(StoreTest, ConcurrentAdmissionsNeverExceedTheLimit) {
  constexpr int kWriters = 4, kEach = 3, kLimit = 5;
  {
    auto s = open();
    ASSERT_TRUE(s.ok()) << s.error().message();
    ASSERT_TRUE((*s)->createTenant("t1", "one").ok());
  }
  std::vector<std::unique_ptr<Store>> writers;
  for (int i = 0; i < kWriters; ++i) {
    auto s = open();
    ASSERT_TRUE(s.ok()) << s.error().message();
    writers.push_back(std::move(*s));
  }
  std::atomic<int> admitted{0}, refused{0}, other{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w)
    threads.emplace_back([&, w] {
      for (int i = 0; i < kEach; ++i) {
        SandboxRecord r{"sb-" + std::to_string(w) + "-" + std::to_string(i), "t1", "minimal"};
        auto s = writers[w]->insertSandboxAdmitted(
            r, [](const TenantLimits&, const TenantUsage& u) -> std::optional<Error> {
              // Widens the window between the check and the insert.
              std::this_thread::sleep_for(std::chrono::milliseconds(2));
              if (u.sandboxes + 1 > kLimit) return Error(Code::kResourceExhausted, "full");
              return std::nullopt;
            });
        if (s.ok())
          ++admitted;
        else if (s.error().code() == Code::kResourceExhausted)
          ++refused;
        else
          ++other;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(admitted.load(), kLimit);
  EXPECT_EQ(refused.load(), kWriters * kEach - kLimit);
  EXPECT_EQ(writers[0]->tenantUsage("t1")->sandboxes, kLimit);
}

// Many machines: nodes heartbeat into a registry, an API replica marks a
// silent one lost (once, whoever notices first), sandboxes record their node,
// and the operations of an API replica that stopped heartbeating go to
// another, each to one claimant.
TEST_P(StoreTest, NodeRegistryAndReplicaTakeover) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  clock_.set(1'000'000);
  NodeRecord n;
  n.name = "n1";
  n.advertise_url = "http://10.0.0.2:8091";
  n.data_url = "http://10.0.0.2:8081";
  n.memory_mib = 4096;
  n.memory_free_mib = 3000;
  n.vcpus = 8;
  n.sandboxes = 2;
  n.templates = {"minimal"};
  n.accel = "tcg";
  n.envd_url = "http://10.0.0.2:49983";
  ASSERT_TRUE(st.heartbeatNode(n).ok());
  n.name = "n2";
  n.envd_url = "";
  ASSERT_TRUE(st.heartbeatNode(n).ok());
  clock_.set(1'005'000);
  n.memory_free_mib = 2000;
  n.volume_free_mib = 51200;
  ASSERT_TRUE(st.heartbeatNode(n).ok());  // n2 again, later
  auto nodes = st.listNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.error().message();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "n1");
  EXPECT_EQ((*nodes)[0].heartbeat_ms, 1'000'000);
  EXPECT_EQ((*nodes)[0].advertise_url, "http://10.0.0.2:8091");
  EXPECT_EQ((*nodes)[0].templates, std::vector<std::string>{"minimal"});
  EXPECT_EQ((*nodes)[0].envd_url, "http://10.0.0.2:49983");
  EXPECT_EQ((*nodes)[1].envd_url, "");
  EXPECT_EQ((*nodes)[1].memory_free_mib, 2000u);
  EXPECT_EQ((*nodes)[0].volume_free_mib, 0u);
  EXPECT_EQ((*nodes)[1].volume_free_mib, 51200u);
  EXPECT_EQ((*nodes)[1].registered_ms, 1'000'000);
  EXPECT_EQ((*nodes)[1].heartbeat_ms, 1'005'000);
  // Only a node whose heartbeat is older than the bound is lost, once.
  EXPECT_FALSE(*st.markNodeLost("n2", 1'003'000));
  EXPECT_TRUE(*st.markNodeLost("n1", 1'003'000));
  EXPECT_FALSE(*st.markNodeLost("n1", 1'003'000));
  EXPECT_TRUE((*st.listNodes())[0].lost);
  ASSERT_TRUE(st.heartbeatNode((*st.listNodes())[0]).ok());  // it came back
  EXPECT_FALSE((*st.listNodes())[0].lost);

  ASSERT_TRUE(st.createTenant("t1", "one").ok());
  SandboxRecord a{"sb-a", "t1", "minimal", SandboxState::kRunning};
  a.node = "n1";
  ASSERT_TRUE(st.insertSandbox(a).ok());
  ASSERT_TRUE(st.insertSandbox({"sb-b", "t1", "minimal", SandboxState::kCreating}).ok());
  ASSERT_TRUE(st.insertSandbox({"sb-c", "t1", "minimal", SandboxState::kFailed}).ok());
  ASSERT_TRUE(st.setSandboxNode("sb-b", "n1").ok());
  ASSERT_TRUE(st.setSandboxNode("sb-c", "n1").ok());
  auto on1 = st.listNodeSandboxes("n1");
  ASSERT_TRUE(on1.ok()) << on1.error().message();
  ASSERT_EQ(on1->size(), 2u);  // not the failed one
  EXPECT_EQ((*on1)[0].id, "sb-a");
  EXPECT_EQ((*on1)[1].node, "n1");
  EXPECT_TRUE(st.listNodeSandboxes("n2")->empty());
  EXPECT_EQ((*st.getSandbox("t1", "sb-a"))->node, "n1");
  EXPECT_EQ(*st.sandboxNode("sb-b"), "n1");
  EXPECT_EQ(*st.sandboxNode("sb-none"), "");

  // Replicas.
  ASSERT_TRUE(st.heartbeatReplica("r1").ok());
  clock_.set(1'010'000);
  ASSERT_TRUE(st.heartbeatReplica("r2").ok());
  OperationRecord o1{"op-1", "t1", "sb-a", "create"};
  o1.owner = "r1";
  OperationRecord o2{"op-2", "t1", "sb-b", "create"};
  o2.owner = "r1";
  o2.created_ms = 1;
  OperationRecord o3{"op-3", "t1", "sb-b", "pause"};
  o3.owner = "r2";
  ASSERT_TRUE(st.insertOperation(o1).ok());
  ASSERT_TRUE(st.insertOperation(o2).ok());
  ASSERT_TRUE(st.insertOperation(o3).ok());
  ASSERT_TRUE(st.setOperationState("op-1", OpState::kDone, "", "").ok());
  auto stale = st.listStaleReplicas(1'006'000);
  ASSERT_TRUE(stale.ok()) << stale.error().message();
  EXPECT_EQ(*stale, std::vector<std::string>{"r1"});
  auto live = st.listLiveReplicas(1'006'000);
  ASSERT_TRUE(live.ok()) << live.error().message();
  EXPECT_EQ(*live, std::vector<std::string>{"r2"});
  EXPECT_EQ(*st.listLiveReplicas(1'000'000), (std::vector<std::string>{"r1", "r2"}));
  auto claimed = st.claimOperations("r1", "r2");
  ASSERT_TRUE(claimed.ok()) << claimed.error().message();
  ASSERT_EQ(claimed->size(), 1u);  // not the finished one
  EXPECT_EQ((*claimed)[0].id, "op-2");
  EXPECT_EQ((*claimed)[0].owner, "r2");
  EXPECT_TRUE(st.claimOperations("r1", "r3")->empty());  // claimed once
  EXPECT_EQ((*st.getOperation("t1", "op-2"))->owner, "r2");
  ASSERT_TRUE(st.deleteReplica("r1").ok());
  EXPECT_TRUE(st.listStaleReplicas(1'006'000)->empty());
}

TEST_P(StoreTest, TemplateCatalogueKeepsVersionsAndTombstones) {
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  clock_.set(2'000'000);
  TemplateRecord t;
  t.name = "t-0123456789ab-py";
  t.version = "v1";
  t.tenant_id = "t1";
  t.manifest_json = R"({"name":"t-0123456789ab-py","version":"v1"})";
  t.sizes_json = R"({"rootfs.ext4":1048576})";
  t.created_at = "2026-01-01T00:00:00Z";
  ASSERT_TRUE(st.putTemplate(t, false).ok());
  // A second node registering the same version changes nothing.
  TemplateRecord again = t;
  again.sizes_json = R"({"rootfs.ext4":1})";
  ASSERT_TRUE(st.putTemplate(again, false).ok());
  t.version = "v2";
  t.created_at = "2026-02-01T00:00:00Z";
  ASSERT_TRUE(st.putTemplate(t, false).ok());
  TemplateRecord builtin = t;
  builtin.name = "minimal";
  builtin.version = "aaaa";
  builtin.tenant_id = "";
  ASSERT_TRUE(st.putTemplate(builtin, false).ok());

  auto all = st.listTemplates(false);
  ASSERT_TRUE(all.ok()) << all.error().message();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].name, "minimal");
  EXPECT_EQ((*all)[1].version, "v1");
  EXPECT_EQ((*all)[1].sizes_json, R"({"rootfs.ext4":1048576})");
  EXPECT_EQ((*all)[1].tenant_id, "t1");
  EXPECT_EQ((*all)[1].registered_ms, 2'000'000);
  auto newest = st.getTemplate("t-0123456789ab-py", "");
  ASSERT_TRUE(newest.ok() && newest->has_value());
  EXPECT_EQ((*newest)->version, "v2");
  auto v1 = st.getTemplate("t-0123456789ab-py", "v1");
  ASSERT_TRUE(v1.ok() && v1->has_value());
  EXPECT_EQ((*v1)->created_at, "2026-01-01T00:00:00Z");
  EXPECT_FALSE(st.getTemplate("nope", "")->has_value());

  // Deleted: gone from lists and gets, kept as a tombstone that a node
  // registering its old files does not undo; a new build (revive) does.
  ASSERT_TRUE(st.deleteTemplate("t-0123456789ab-py", "v2").ok());
  EXPECT_EQ(st.deleteTemplate("t-0123456789ab-py", "v2").error().code(), Code::kNotFound);
  EXPECT_EQ((*st.getTemplate("t-0123456789ab-py", ""))->version, "v1");
  EXPECT_FALSE(st.getTemplate("t-0123456789ab-py", "v2")->has_value());
  EXPECT_EQ(st.listTemplates(false)->size(), 2u);
  auto with = st.listTemplates(true);
  ASSERT_EQ(with->size(), 3u);
  EXPECT_TRUE((*with)[2].deleted);
  ASSERT_TRUE(st.putTemplate(t, false).ok());
  EXPECT_FALSE(st.getTemplate("t-0123456789ab-py", "v2")->has_value());
  t.sizes_json = R"({"rootfs.ext4":7})";
  ASSERT_TRUE(st.putTemplate(t, true).ok());
  auto back = st.getTemplate("t-0123456789ab-py", "v2");
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->sizes_json, R"({"rootfs.ext4":7})");
  EXPECT_FALSE((*back)->deleted);
}

}  // namespace
}  // namespace vessel::store
