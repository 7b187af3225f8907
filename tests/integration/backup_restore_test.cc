// Backup and restore of the store, run as docs/operations.md writes them,
// for real: PostgreSQL with pg_dump and pg_restore (a database dropped and
// restored into an empty one, then an API replica serving it), and SQLite
// with `sqlite3 .backup` taken while vesseld runs, restored with vesseld
// stopped. What the store held at the backup is what vesseld serves after
// the restore; what changed after the backup is gone.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "base/aead.h"
#include "base/child_process.h"
#include "base/sha256.h"
#include "guest_env.h"
#include "http_client.h"
#include "store/store.h"
#include "store/testing/postgres_server.h"
#include "vesseld_harness.h"

namespace vessel {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Runs argv to its end (bounded); its output goes to `log`.
bool run(const std::vector<std::string>& argv, const std::string& log) {
  auto fd = Fd::open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (!fd.ok()) return false;
  SpawnOptions o;
  o.argv = argv;
  o.fds = {{fd->get(), 1}, {fd->get(), 2}};
  o.die_with_parent = true;
  auto p = ChildProcess::spawn(o);
  if (!p.ok()) return false;
  auto st = p->waitFor(60s);
  return st.ok() && st->success();
}

std::string readFile(const std::string& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::set<std::string> names(const testing::Reply& r, const char* list, const char* key) {
  std::set<std::string> out;
  auto v = r.js();
  if (!v.is_object() || !v.as_object().contains(list)) return out;
  for (const auto& e : v.as_object().at(list).as_array()) out.insert(testing::str(e, key));
  return out;
}

testing::Reply get(uint16_t port, const std::string& target, const std::string& key) {
  testing::Request r;
  r.target = target;
  r.bearer = key;
  return testing::call(port, r);
}

// pg_dump --format=custom, the database dropped and made again empty,
// pg_restore --no-owner: an API replica on the restored database serves the
// tenants, keys, sandboxes and credentials of the dump, and the envd token
// key (tokens handed out before the backup stay valid).
TEST(BackupRestoreTest, PostgresDumpAndRestore) {
  testing::ScratchDir dir;
  auto pg = store::testing::PostgresServer::start();
  ASSERT_TRUE(pg.ok()) << pg.error().message();
  auto url = (*pg)->createDatabase("vessel");
  ASSERT_TRUE(url.ok()) << url.error().message();
  const std::string key = "acme-key-0123456789abcdef";
  std::string token_key;
  {
    auto s = store::openPostgres(*url);
    ASSERT_TRUE(s.ok()) << s.error().message();
    store::Store& st = **s;
    // The replicas' credential key is backed up with the database: without
    // it the restored credentials do not open (docs/operations.md).
    auto ck = aeadKeyFile(dir.path() + "/credential-key");
    ASSERT_TRUE(ck.ok()) << ck.error().message();
    ASSERT_TRUE(st.useCredentialKey(*ck).ok());
    ASSERT_TRUE(st.createTenant("acme", "Acme").ok());
    ASSERT_TRUE(st.addApiKey("acme", sha256Hex(key)).ok());
    for (const char* id : {"sb-backup-1", "sb-backup-2"}) {
      store::SandboxRecord sb{id, "acme", "minimal", store::SandboxState::kPaused};
      sb.vcpus = 1;
      sb.memory_mib = 256;
      sb.node = "node-a";
      ASSERT_TRUE(st.insertSandbox(sb).ok());
    }
    store::CredentialRecord c;
    c.tenant_id = "acme";
    c.name = "gh";
    c.hosts = {"api.github.com"};
    c.header = "Authorization";
    c.value = "Bearer secret";
    ASSERT_TRUE(st.putCredential(c).ok());
    // Meta survives too (the E2B token key left the store in issue 24: a
    // replica clears `e2b_token_key`, so another key stands for it).
    token_key = st.getOrSetMeta("backup_test_meta", std::string(64, 'a')).value_or("");
  }
  const std::string bin = store::testing::PostgresServerOptions{}.bin_dir;
  const std::string dump = dir.path() + "/vessel.dump", log = dir.path() + "/pg-tools.log";
  ASSERT_TRUE(run({bin + "/pg_dump", "--format=custom", "--file=" + dump, *url}, log))
      << readFile(log);
  ASSERT_TRUE((*pg)->exec("postgres", "DROP DATABASE vessel").ok());
  ASSERT_TRUE((*pg)->createDatabase("vessel").ok());
  ASSERT_TRUE(run({bin + "/pg_restore", "--no-owner", "--dbname=" + *url, dump}, log))
      << readFile(log);

  std::ofstream(dir.path() + "/node-token") << "backup-test-node-token-0123456789\n";
  uint16_t port = testing::freePort();
  auto out = Fd::open(dir.path() + "/api.log", O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_TRUE(out.ok());
  SpawnOptions o;
  // The test build of vesseld: --hypervisor=fake is not in the production one.
  o.argv = {VESSELD_FAKE_PATH,
            "--role=api",
            "--store=" + *url,
            "--hypervisor=fake",
            "--no-jail",
            "--no-egress",
            "--listen=127.0.0.1:" + std::to_string(port),
            "--e2b-listen",
            "",
            "--e2b-envd-listen",
            "",
            "--node-token-file=" + dir.path() + "/node-token",
            "--credential-key-file=" + dir.path() + "/credential-key",
            "--state-dir=" + dir.path() + "/api",
            "--cache-dir=" + dir.path() + "/api-cache"};
  o.fds = {{out->get(), 1}, {out->get(), 2}};
  o.die_with_parent = true;
  auto api = ChildProcess::spawn(o);
  ASSERT_TRUE(api.ok()) << api.error().message();
  testing::Reply listed;
  for (int i = 0; i < 300 && listed.status != 200 && !api->tryWait(); ++i) {
    listed = get(port, "/v1/sandboxes", key);
    if (listed.status != 200) std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(listed.status, 200) << listed.body << readFile(dir.path() + "/api.log");
  EXPECT_EQ(names(listed, "sandboxes", "id"),
            (std::set<std::string>{"sb-backup-1", "sb-backup-2"}));
  EXPECT_EQ(names(get(port, "/v1/credentials", key), "credentials", "name"),
            std::set<std::string>{"gh"});
  EXPECT_EQ(get(port, "/v1/sandboxes", "wrong-key").status, 401);
  (void)api->signal(SIGTERM);
  (void)api->waitFor(20s);
  auto s = store::openPostgres(*url);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->getMeta("backup_test_meta").value_or(std::nullopt), token_key);
  EXPECT_EQ((*(*s)->getSandbox("acme", "sb-backup-1"))->node, "node-a");
  ASSERT_TRUE((*s)->useCredentialKey(*aeadKeyFile(dir.path() + "/credential-key")).ok());
  auto gh = (*s)->getCredential("acme", "gh");
  ASSERT_TRUE(gh.ok() && gh->has_value()) << (gh.ok() ? "none" : gh.error().message());
  EXPECT_EQ((*gh)->value, "Bearer secret");
}

// `sqlite3 vessel.db ".backup …"` while vesseld runs; then a sandbox is
// deleted and a credential made; vesseld stopped, the WAL files removed,
// the backup installed, vesseld started: the credential made after the
// backup is gone, and the sandbox whose VM went after the backup is marked
// failed with the reason (its VM no longer exists).
TEST(BackupRestoreTest, SqliteOnlineBackupAndRestore) {
  testing::Vesseld v(VESSELD_PATH, {"--no-egress", "--warm-pool=none"});
  ASSERT_TRUE(v.start());
  std::string why;
  std::string id = v.createSandbox("{}", &why);
  ASSERT_FALSE(id.empty()) << why;
  json::object gh{{"name", "gh"},
                  {"hosts", json::array{"api.github.com"}},
                  {"header", "Authorization"},
                  {"value", "Bearer before-0123456789abcdef"}};
  ASSERT_EQ(v.call("POST", "/v1/credentials", json::serialize(gh)).status, 201);

  const std::string db = v.stateDir() + "/vessel.db";
  const std::string backup = v.stateDir() + "/../vessel-backup.db";
  const std::string log = v.stateDir() + "/../sqlite3.log";
  ASSERT_TRUE(run({"sqlite3", db, ".backup '" + backup + "'"}, log)) << readFile(log);
  ASSERT_TRUE(run({"sqlite3", backup, "PRAGMA integrity_check"}, log));
  EXPECT_NE(readFile(log).find("ok"), std::string::npos) << readFile(log);

  // After the backup: the sandbox goes, a credential comes.
  ASSERT_TRUE(v.deleteSandbox(id));
  json::object later{{"name", "later"},
                     {"hosts", json::array{"example.com"}},
                     {"header", "Authorization"},
                     {"value", "Bearer after-0123456789abcdef"}};
  ASSERT_EQ(v.call("POST", "/v1/credentials", json::serialize(later)).status, 201);

  ASSERT_TRUE(v.stop().success());
  for (const char* sfx : {"-wal", "-shm"}) fs::remove(db + sfx);
  fs::copy_file(backup, db, fs::copy_options::overwrite_existing);
  fs::permissions(db, fs::perms::owner_read | fs::perms::owner_write);
  ASSERT_TRUE(v.start());
  EXPECT_EQ(names(v.call("GET", "/v1/credentials"), "credentials", "name"),
            std::set<std::string>{"gh"});
  auto sb = v.call("GET", "/v1/sandboxes/" + id);
  ASSERT_EQ(sb.status, 200) << sb.body;
  EXPECT_EQ(testing::str(sb.js(), "state"), "failed") << sb.body;
  EXPECT_FALSE(testing::str(sb.js(), "error").empty()) << sb.body;
}

}  // namespace
}  // namespace vessel
