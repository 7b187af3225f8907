// Opening databases: the schema history on both engines, databases made
// by earlier versions (upgraded in place), and what only one engine has
// (SQLite's legacy user_version; PostgreSQL's reconnect and timeouts).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/fd.h"
#include "store/store.h"
#include "store/store_test.h"

namespace vessel::store {
namespace {

TEST_P(StoreTest, UnopenableDatabaseIsAnError) {
  auto s = GetParam() == Engine::kPostgres
               ? openPostgres(pgServer()->url("no_such_database"), &clock_)
               : openSqlite("/nonexistent-dir/x.db", &clock_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kUnavailable);
}

TEST_P(StoreTest, RefusesAMigrationItDoesNotKnow) {
  { ASSERT_TRUE(open().ok()); }
  rawExec("INSERT INTO schema_migrations VALUES(77, 0)");
  auto s = open();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kFailedPrecondition);
}

// Migration 8: what a sandbox's timeout does is kept with it, and a row
// from before the migration reads as the old behaviour (delete).
TEST_P(StoreTest, OnTimeoutSettingsPersistAndDefaultToDelete) {
  {
    auto s = open();
    ASSERT_TRUE(s.ok()) << s.error().message();
    ASSERT_TRUE((*s)->createTenant("t1", "one").ok());
    SandboxRecord p{"sb-p", "t1", "base", SandboxState::kRunning, "", 2, 512};
    p.pause_on_timeout = true;
    p.pause_memory = false;
    p.auto_resume = true;
    p.lifetime_s = 300;
    SandboxRecord d{"sb-d", "t1", "base", SandboxState::kRunning, "", 2, 512};
    ASSERT_TRUE((*s)->insertSandbox(p).ok());
    ASSERT_TRUE((*s)->insertSandboxAdmitted(d, [](auto&, auto) { return std::nullopt; }).ok());
  }
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  auto p = (*s)->getSandbox("t1", "sb-p");
  ASSERT_TRUE(p.ok() && p->has_value());
  EXPECT_TRUE((*p)->pause_on_timeout);
  EXPECT_FALSE((*p)->pause_memory);
  EXPECT_TRUE((*p)->auto_resume);
  EXPECT_EQ((*p)->lifetime_s, 300);
  auto any = (*s)->findSandbox("sb-p");  // by id alone
  ASSERT_TRUE(any.ok() && any->has_value());
  EXPECT_EQ((*any)->tenant_id, "t1");
  EXPECT_FALSE((*s)->findSandbox("sb-none")->has_value());
  auto d = (*s)->getSandbox("t1", "sb-d");
  ASSERT_TRUE(d.ok() && d->has_value());
  EXPECT_FALSE((*d)->pause_on_timeout);
  EXPECT_TRUE((*d)->pause_memory);
  EXPECT_FALSE((*d)->auto_resume);
  s->reset();

  // A database from before migration 8: its rows get the defaults.
  rawExec(
      "ALTER TABLE sandboxes DROP COLUMN on_timeout; ALTER TABLE sandboxes DROP COLUMN "
      "pause_memory; ALTER TABLE sandboxes DROP COLUMN auto_resume; ALTER TABLE sandboxes DROP "
      "COLUMN lifetime_s; DELETE FROM schema_migrations WHERE number=8;");
  s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ((*s)->schemaVersion(), 20);
  p = (*s)->getSandbox("t1", "sb-p");
  ASSERT_TRUE(p.ok() && p->has_value());
  EXPECT_FALSE((*p)->pause_on_timeout);
  EXPECT_TRUE((*p)->pause_memory);
  EXPECT_FALSE((*p)->auto_resume);
  EXPECT_EQ((*p)->lifetime_s, 0);
}

// Replicas starting together on a new database: each migrates or waits
// for the other; none fails and the schema is whole.
TEST_P(StoreTest, ConcurrentOpenersMigrateOnce) {
  constexpr int kOpeners = 4;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  std::vector<std::string> errors(kOpeners);
  for (int i = 0; i < kOpeners; ++i)
    threads.emplace_back([&, i] {
      auto s = open();
      if (s.ok() && (*s)->schemaVersion() == 20) {
        ++ok;
      } else {
        errors[i] =
            s.ok() ? "version " + std::to_string((*s)->schemaVersion()) : s.error().message();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kOpeners) << errors[0] << errors[1] << errors[2] << errors[3];
  auto s = open();
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE((*s)->createTenant("t1", "one").ok());
}

std::string readFixture(const std::string& name) {
  std::ifstream in(std::string(STORE_TESTDATA_DIR) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A database made by the store before it was one SQL store (schema 11,
// testdata/schema11.*.sql, dumped from each engine with a row of every
// kind): it opens in place, every row reads back as it was written, and
// writes go on from it (the event sequence continues after its last).
TEST_P(StoreTest, OpensADatabaseMadeBySchema11) {
  const std::string dump = readFixture(GetParam() == Engine::kPostgres ? "schema11.postgres.sql"
                                                                       : "schema11.sqlite.sql");
  ASSERT_GT(dump.size(), 1000u) << "fixture missing under " << STORE_TESTDATA_DIR;
  rawExec(dump);
  auto s = open();
  ASSERT_TRUE(s.ok()) << s.error().message();
  Store& st = **s;
  EXPECT_EQ(st.schemaVersion(), 20);
  EXPECT_EQ(st.getMeta("instance_id")->value_or(""), "inst-0123");
  EXPECT_EQ(st.countTenants().value_or(0), 2);
  EXPECT_EQ(st.tenantForKey("hash1")->value_or(""), "t1");
  auto l1 = st.tenantLimits("t1");
  ASSERT_TRUE(l1.ok()) << l1.error().message();
  EXPECT_EQ(l1->max_sandboxes.value_or(0), 3);
  EXPECT_EQ(l1->max_memory_mib.value_or(0), 1024);
  EXPECT_EQ(l1->max_vcpus.value_or(0), 4);
  EXPECT_EQ(l1->max_disk_mib.value_or(0), 8192);
  EXPECT_FALSE(st.tenantLimits("t2")->max_sandboxes.has_value());

  auto a = st.getSandbox("t1", "sb-a");
  ASSERT_TRUE(a.ok() && a->has_value());
  const SandboxRecord& r = **a;
  EXPECT_EQ(r.template_name, "base");
  EXPECT_EQ(r.state, SandboxState::kRunning);
  EXPECT_EQ(r.vcpus, 2u);
  EXPECT_EQ(r.memory_mib, 512u);
  EXPECT_EQ(r.disk_mib, 1024u);
  EXPECT_EQ(r.metadata, (std::map<std::string, std::string>{{"k", "v"}}));
  EXPECT_EQ(r.created_ms, 1000);
  EXPECT_EQ(r.updated_ms, 2000);
  EXPECT_EQ(r.idle_timeout_s, 60);
  EXPECT_EQ(r.expires_ms, 99'000);
  EXPECT_EQ(r.last_active_ms, 1234);
  EXPECT_EQ(r.node, "n1");
  EXPECT_TRUE(r.pause_on_timeout);
  EXPECT_FALSE(r.pause_memory);
  EXPECT_TRUE(r.auto_resume);
  EXPECT_EQ(r.lifetime_s, 300);
  auto f = st.findSandbox("sb-f");
  ASSERT_TRUE(f.ok() && f->has_value());
  EXPECT_EQ((*f)->error, "boot failed");
  EXPECT_FALSE((*f)->pause_on_timeout);
  EXPECT_TRUE((*f)->pause_memory);
  auto live = st.listLiveSandboxes();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 2u);
  EXPECT_EQ((*live)[1].state, SandboxState::kPaused);
  auto use = st.tenantUsage("t1");
  ASSERT_TRUE(use.ok());
  EXPECT_EQ(use->sandboxes, 1);
  EXPECT_EQ(use->memory_mib, 512);
  EXPECT_EQ(use->vcpus, 2);
  EXPECT_EQ(use->disk_mib, 1024);

  auto op = st.getOperation("t1", "op-2");
  ASSERT_TRUE(op.ok() && op->has_value());
  EXPECT_EQ((*op)->state, OpState::kFailed);
  EXPECT_EQ((*op)->error_code, "internal");
  EXPECT_EQ((*op)->error_message, "boom");
  auto unfinished = st.listUnfinishedOperations();
  ASSERT_TRUE(unfinished.ok());
  ASSERT_EQ(unfinished->size(), 1u);
  EXPECT_EQ((*unfinished)[0].owner, "r1");
  EXPECT_EQ((*unfinished)[0].created_ms, 10);

  auto events = st.listEvents("t1", "", 0, 10);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].seq, 1);
  EXPECT_EQ((*events)[0].data_json, R"({"n":1})");
  EXPECT_EQ((*events)[1].seq, 3);
  EXPECT_EQ((*events)[1].at_ms, 7);
  auto seq = st.appendEvent({0, "t1", "op-1", "sb-a", "operation.done"});
  ASSERT_TRUE(seq.ok()) << seq.error().message();
  EXPECT_EQ(*seq, 4);

  auto session = st.sessionForToken("tok1");
  ASSERT_TRUE(session.ok() && session->has_value());
  EXPECT_EQ((*session)->sandbox_id, "sb-a");
  EXPECT_EQ((*session)->expires_ms, 900'000);
  // Its credential value was stored plain: the key seals it in place.
  EXPECT_FALSE(st.getCredential("t1", "gh").ok());  // no key yet
  EXPECT_EQ(rawText("SELECT value FROM credentials WHERE name='gh'"), "Bearer x");
  auto sealed = st.useCredentialKey(std::string(32, 'k'));
  ASSERT_TRUE(sealed.ok()) << sealed.error().message();
  EXPECT_EQ(*sealed, 1);
  EXPECT_EQ(rawText("SELECT value FROM credentials WHERE name='gh'").find("Bearer"),
            std::string::npos);
  EXPECT_EQ(*st.useCredentialKey(std::string(32, 'k')), 0);  // once
  auto cred = st.getCredential("t1", "gh");
  ASSERT_TRUE(cred.ok() && cred->has_value()) << (cred.ok() ? "none" : cred.error().message());
  EXPECT_EQ((*cred)->hosts, std::vector<std::string>{"api.a.test"});
  EXPECT_EQ((*cred)->value, "Bearer x");
  EXPECT_EQ((*cred)->created_ms, 42);
  // Settings rows written as JSON by earlier versions read typed.
  auto net = st.getSandboxNetwork("sb-a");
  ASSERT_TRUE(net.ok() && net->has_value()) << (net.ok() ? "none" : net.error().message());
  EXPECT_EQ((*net)->mode, "allowlist");
  auto sb = st.getSandbox("t1", "sb-a");
  ASSERT_TRUE(sb.ok() && sb->has_value());
  ASSERT_TRUE((*sb)->ingress.has_value());
  EXPECT_FALSE((*sb)->ingress->public_traffic);

  auto nodes = st.listNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].envd_url, "http://10.0.0.2:49983");
  EXPECT_EQ((*nodes)[0].memory_free_mib, 3000u);
  EXPECT_EQ((*nodes)[0].templates, std::vector<std::string>{"minimal"});
  EXPECT_FALSE((*nodes)[0].lost);
  EXPECT_TRUE((*nodes)[1].lost);
  EXPECT_EQ(*st.listLiveReplicas(0), std::vector<std::string>{"r1"});
  auto templates = st.listTemplates(true);
  ASSERT_TRUE(templates.ok());
  ASSERT_EQ(templates->size(), 2u);
  EXPECT_TRUE((*templates)[0].deleted);  // v0, the older
  EXPECT_EQ((*st.getTemplate("t-0123456789ab-py", ""))->version, "v1");

  // Writes go on: a duplicate is still refused, a new row lands.
  EXPECT_EQ(st.createTenant("t1", "again").error().code(), Code::kAlreadyExists);
  ASSERT_TRUE(st.insertSandbox({"sb-new", "t2", "minimal", SandboxState::kCreating}).ok());
  s->reset();
  auto again = open();
  ASSERT_TRUE(again.ok()) << again.error().message();
  EXPECT_EQ((*again)->schemaVersion(), 20);
  EXPECT_TRUE((*again)->findSandbox("sb-new")->has_value());
}

// PostgreSQL only: the server goes away and comes back.
TEST(PostgresStoreTest, ReportsAnAbsentServerAndReconnects) {
  std::string why;
  auto* pg = pgServer(&why);
  ASSERT_NE(pg, nullptr) << why;
  auto url = pg->createDatabase("reconnect");
  ASSERT_TRUE(url.ok()) << url.error().message();
  auto s = openPostgres(*url);
  ASSERT_TRUE(s.ok()) << s.error().message();
  ASSERT_TRUE((*s)->setMeta("k", "v").ok());
  ASSERT_TRUE(pg->stop().ok());
  auto absent = (*s)->getMeta("k");
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.error().code(), Code::kUnavailable);
  ASSERT_TRUE(pg->restart().ok()) << pg->log();
  auto back = (*s)->getMeta("k");
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->value_or(""), "v");
}

// Store calls block vesseld's io thread: a server that takes the
// connection and then never answers (a listening socket nobody serves) is
// an error within seconds, not a thread stuck for good.
TEST(PostgresStoreTest, AServerThatNeverAnswersFailsFast) {
  Fd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_GE(sock.get(), 0);
  const int fd = sock.get();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);  // SAFETY: sockaddr_in
  ASSERT_EQ(::listen(fd, 4), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);  // SAFETY: as above
  auto start = std::chrono::steady_clock::now();
  auto s =
      openPostgres("postgres://vessel@127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/vessel");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kUnavailable);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(PostgresStoreTest, UrlsAreShownWithoutTheirPassword) {
  EXPECT_EQ(redactUrl("postgres://vessel:s3cret@db.example:5432/vessel?sslmode=require"),
            "postgres://vessel:***@db.example:5432/vessel?sslmode=require");
  EXPECT_EQ(redactUrl("postgres://vessel@db/vessel"), "postgres://vessel@db/vessel");
  EXPECT_EQ(redactUrl("postgresql:///vessel?host=/run/pg"), "postgresql:///vessel?host=/run/pg");
  EXPECT_EQ(redactUrl("host=db password=s3cret dbname=v"), "host=db password=*** dbname=v");
}

// SQLite only: databases from before numbered migrations.
class SqliteStoreTest : public ::testing::Test {
 protected:
  std::string path_ =
      ::testing::TempDir() + "/sqlite_store_test_" + std::to_string(::getpid()) + ".db";
  void TearDown() override {
    for (const char* sfx : {"", "-wal", "-shm"}) ::unlink((path_ + sfx).c_str());
  }
};

TEST_F(SqliteStoreTest, RefusesNewerSchema) {
  {
    sqlite3* db;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db, "PRAGMA user_version=999", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  auto s = openSqlite(path_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), Code::kFailedPrecondition);
}

TEST_F(SqliteStoreTest, LegacyVersionedDatabaseGetsTheMissingMigrations) {
  {
    // A database from before numbered migrations: 1 and 2 applied, counted
    // in user_version.
    sqlite3* db;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    sqlite3_exec(db,
                 "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
                 "CREATE TABLE tenants (id TEXT PRIMARY KEY, name TEXT NOT NULL,"
                 " created_ms INTEGER NOT NULL);"
                 "INSERT INTO tenants VALUES('t1','one',1);"
                 "CREATE TABLE sandboxes (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL,"
                 " template TEXT NOT NULL, state TEXT NOT NULL, error TEXT NOT NULL DEFAULT '',"
                 " vcpus INTEGER NOT NULL, memory_mib INTEGER NOT NULL, metadata TEXT NOT NULL,"
                 " created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL);"
                 "CREATE TABLE operations (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL,"
                 " sandbox_id TEXT NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,"
                 " error_code TEXT NOT NULL DEFAULT '', error_message TEXT NOT NULL DEFAULT '',"
                 " created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL);"
                 "PRAGMA user_version=2",
                 nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  auto s = openSqlite(path_);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ((*s)->schemaVersion(), 20);
  auto l = (*s)->tenantLimits("t1");
  ASSERT_TRUE(l.ok()) << l.error().message();
  EXPECT_FALSE(l->max_sandboxes.has_value());
}

}  // namespace
}  // namespace vessel::store
