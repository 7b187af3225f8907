// The Store on PostgreSQL, for several vesseld processes (API replicas)
// sharing one database. Same schema history as SQLite (migrations.cc),
// same timestamps (the injected WallClock, never the server's now()), same
// answers: the store test suite runs against both engines.
//
// Concurrency. Most calls are one statement in autocommit mode, which is
// atomic on its own under READ COMMITTED, PostgreSQL's default: an UPDATE
// re-checks its WHERE clause against the newest committed version of the
// row it waited for, so conditional updates (touchSandbox's GREATEST,
// setOperationState's "not finished yet") cannot lose a concurrent write.
// The places where SQLite relied on being the only writer say what they
// need instead:
//   - migrate(): a transaction holding an advisory lock, so replicas
//     starting together migrate once and wait for each other.
//   - appendEvent(): a transaction holding an advisory lock (per tenant)
//     around taking the sequence number and inserting, so a tenant's event
//     numbers become visible in commit order; without it a reader following
//     "after seq N" (SSE) could see N+1 commit before N and skip N forever.
//   - insertSandboxAdmitted(): a transaction holding the tenant's row lock
//     (SELECT ... FOR UPDATE) across the quota check and the insert, so
//     two replicas cannot both admit the tenant's last sandbox.
// Other sequences of calls by the callers (a state check, then a
// transition) are not atomic across replicas yet; see docs/design.md,
// "The store".
//
// Calls are synchronous, as with SQLite (they run on the io thread): each
// costs one or more round trips to the server, the price of sharing state.
#include <algorithm>
#include <mutex>
#include <pqxx/pqxx>
#include <set>
#include <type_traits>

#include "store/migrations.h"
#include "store/store.h"

namespace vessel::store {

namespace {

// Keys of the advisory locks (pg_advisory_xact_lock), arbitrary constants
// shared by every vesseld on the database.
constexpr int64_t kMigrationLock = 0x7665'7373'656c'0001;  // "vessel" 1
// Events are locked per tenant, (kEventLockClass, hash of the tenant id), a
// key space apart from the one-number keys: readers only ever follow one
// tenant's events, so only those need to appear in order, and tenants do
// not wait for each other (a hash collision only makes two share a lock).
constexpr int32_t kEventLockClass = 0x7665'7302;

constexpr const char* kSandboxCols =
    "id,tenant_id,template,state,error,vcpus,memory_mib,metadata,created_ms,updated_ms,"
    "idle_timeout_s,expires_ms,last_active_ms,disk_mib,node,on_timeout,pause_memory,auto_resume,"
    "lifetime_s";
SandboxRecord readSandbox(const pqxx::row& r) {
  SandboxRecord s;
  s.id = r[0].as<std::string>();
  s.tenant_id = r[1].as<std::string>();
  s.template_name = r[2].as<std::string>();
  s.state = parseState(r[3].as<std::string>()).value_or(SandboxState::kFailed);
  s.error = r[4].as<std::string>();
  s.vcpus = static_cast<unsigned>(r[5].as<int64_t>());
  s.memory_mib = static_cast<uint64_t>(r[6].as<int64_t>());
  s.metadata_json = r[7].as<std::string>();
  s.created_ms = r[8].as<int64_t>();
  s.updated_ms = r[9].as<int64_t>();
  s.idle_timeout_s = r[10].as<int64_t>();
  s.expires_ms = r[11].as<int64_t>();
  s.disk_mib = static_cast<uint64_t>(r[13].as<int64_t>());
  s.last_active_ms = r[12].as<int64_t>();
  s.node = r[14].as<std::string>();
  s.pause_on_timeout = r[15].as<std::string>() == "pause";
  s.pause_memory = r[16].as<int64_t>() != 0;
  s.auto_resume = r[17].as<int64_t>() != 0;
  s.lifetime_s = r[18].as<int64_t>();
  return s;
}
std::vector<SandboxRecord> readSandboxes(const pqxx::result& res) {
  std::vector<SandboxRecord> out;
  out.reserve(res.size());
  for (const auto& r : res) out.push_back(readSandbox(r));
  return out;
}

constexpr const char* kOperationCols =
    "id,tenant_id,sandbox_id,kind,state,error_code,error_message,created_ms,updated_ms,owner";
OperationRecord readOperation(const pqxx::row& r) {
  OperationRecord o;
  o.id = r[0].as<std::string>();
  o.tenant_id = r[1].as<std::string>();
  o.sandbox_id = r[2].as<std::string>();
  o.kind = r[3].as<std::string>();
  o.state = parseOpState(r[4].as<std::string>()).value_or(OpState::kFailed);
  o.error_code = r[5].as<std::string>();
  o.error_message = r[6].as<std::string>();
  o.created_ms = r[7].as<int64_t>();
  o.updated_ms = r[8].as<int64_t>();
  o.owner = r[9].as<std::string>();
  return o;
}

constexpr const char* kCredentialCols = "tenant_id,name,hosts,header,value,created_ms";
CredentialRecord readCredential(const pqxx::row& r) {
  CredentialRecord c;
  c.tenant_id = r[0].as<std::string>();
  c.name = r[1].as<std::string>();
  c.hosts_json = r[2].as<std::string>();
  c.header = r[3].as<std::string>();
  c.value = r[4].as<std::string>();
  c.created_ms = r[5].as<int64_t>();
  return c;
}

std::optional<int64_t> optionalInt(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<int64_t>();
}

std::string str(std::string_view s) { return std::string(s); }

// What run() returns for a body returning T: Result<T>, and a body's own
// Result<T> (or Status) unchanged.
template <typename T>
struct AsResult {
  using type = Result<T>;
};
template <typename T>
struct AsResult<Result<T>> {
  using type = Result<T>;
};

class PostgresStore : public Store {
 public:
  PostgresStore(std::string conninfo, std::string shown, const WallClock& clock)
      : conninfo_(std::move(conninfo)), shown_(std::move(shown)), clock_(clock) {}

  std::string_view engine() const override { return "postgres"; }
  int schemaVersion() const override { return version_; }

  Status migrate() {
    return run("migrate", [&](pqxx::connection& c) {
      pqxx::work w(c);
      // Serializes every vesseld's migration; released at commit.
      // Migrations may rewrite big tables, and others wait here meanwhile.
      w.exec("SET LOCAL statement_timeout = 0");
      w.exec_params("SELECT pg_advisory_xact_lock($1)", kMigrationLock);
      w.exec(
          "CREATE TABLE IF NOT EXISTS schema_migrations (number BIGINT PRIMARY KEY,"
          " applied_ms BIGINT NOT NULL)");
      std::set<int> applied;
      for (const auto& r : w.exec("SELECT number FROM schema_migrations"))
        applied.insert(r[0].as<int>());
      if (auto s = checkKnown(applied); !s.ok()) return s;  // rolled back with `w`
      for (const auto& m : migrations(Dialect::kPostgres)) {
        if (applied.count(m.number)) continue;
        w.exec(m.sql);
        w.exec_params("INSERT INTO schema_migrations(number, applied_ms) VALUES($1,$2)", m.number,
                      nowMs());
        applied.insert(m.number);
      }
      w.commit();
      version_ = *applied.rbegin();
      return okStatus();
    });
  }

  Result<std::optional<std::string>> getMeta(const std::string& key) override {
    return run("get meta " + key, [&](pqxx::connection& c) {
      auto r = pqxx::nontransaction(c).exec_params("SELECT value FROM meta WHERE key=$1", key);
      return r.empty() ? std::optional<std::string>()
                       : std::optional<std::string>(r[0][0].as<std::string>());
    });
  }
  Result<std::string> getOrSetMeta(const std::string& key, const std::string& value) override {
    return run("get or set meta " + key, [&](pqxx::connection& c) {
      pqxx::nontransaction tx(c);
      tx.exec_params("INSERT INTO meta(key,value) VALUES($1,$2) ON CONFLICT(key) DO NOTHING", key,
                     value);
      return tx.exec_params1("SELECT value FROM meta WHERE key=$1", key)[0].as<std::string>();
    });
  }
  Status setMeta(const std::string& key, const std::string& value) override {
    return exec0("set meta " + key,
                 "INSERT INTO meta(key,value) VALUES($1,$2) "
                 "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                 key, value);
  }

  Status createTenant(const std::string& id, const std::string& name) override {
    return exec0("create tenant " + id, "INSERT INTO tenants(id,name,created_ms) VALUES($1,$2,$3)",
                 id, name, nowMs());
  }
  Result<int64_t> countTenants() override {
    return run("count tenants", [&](pqxx::connection& c) {
      return pqxx::nontransaction(c).exec("SELECT count(*) FROM tenants")[0][0].as<int64_t>();
    });
  }
  Status addApiKey(const std::string& tenant_id, const std::string& key_sha256) override {
    return exec0("add api key for tenant " + tenant_id,
                 "INSERT INTO api_keys(key_sha256,tenant_id,created_ms) VALUES($1,$2,$3)",
                 key_sha256, tenant_id, nowMs());
  }
  Result<std::optional<std::string>> tenantForKey(const std::string& key_sha256) override {
    return run("look up api key", [&](pqxx::connection& c) {
      auto r = pqxx::nontransaction(c).exec_params(
          "SELECT tenant_id FROM api_keys WHERE key_sha256=$1", key_sha256);
      return r.empty() ? std::optional<std::string>()
                       : std::optional<std::string>(r[0][0].as<std::string>());
    });
  }

  Status insertSandbox(const SandboxRecord& s) override {
    return run("insert sandbox " + s.id, [&](pqxx::connection& c) {
      pqxx::nontransaction t(c);
      insertSandboxIn(t, s);
      return okStatus();
    });
  }
  Status insertSandboxAdmitted(const SandboxRecord& s, const Admission& admit) override {
    return run("insert sandbox " + s.id, [&](pqxx::connection& c) -> Status {
      // READ COMMITTED. The tenant's row lock (FOR UPDATE) serializes the
      // admissions of one tenant across every vesseld; the usage read after
      // it takes a fresh snapshot (one per statement at this level), so it
      // sees every admission committed before the lock was granted.
      pqxx::work w(c);
      auto t = w.exec_params(
          "SELECT max_sandboxes, max_memory_mib, max_vcpus, max_disk_mib FROM tenants WHERE id=$1"
          " FOR UPDATE",
          s.tenant_id);
      if (t.empty()) return Error(Code::kNotFound, "tenant " + s.tenant_id + " does not exist");
      TenantLimits l{optionalInt(t[0][0]), optionalInt(t[0][1]), optionalInt(t[0][2]),
                     optionalInt(t[0][3])};
      if (auto refused = admit(l, usageIn(w, s.tenant_id))) return *refused;  // rolled back
      insertSandboxIn(w, s);
      w.commit();
      return okStatus();
    });
  }
  Status setSandboxState(const std::string& id, SandboxState state,
                         const std::string& error) override {
    return exec0("update sandbox " + id,
                 "UPDATE sandboxes SET state=$1, error=$2, updated_ms=$3 WHERE id=$4",
                 str(stateName(state)), error, nowMs(), id);
  }
  Result<std::optional<SandboxRecord>> getSandbox(const std::string& tenant_id,
                                                  const std::string& id) override {
    return run("get sandbox " + id, [&](pqxx::connection& c) {
      auto r = pqxx::nontransaction(c).exec_params(
          std::string("SELECT ") + kSandboxCols + " FROM sandboxes WHERE tenant_id=$1 AND id=$2",
          tenant_id, id);
      return r.empty() ? std::optional<SandboxRecord>()
                       : std::optional<SandboxRecord>(readSandbox(r[0]));
    });
  }
  Result<std::optional<SandboxRecord>> findSandbox(const std::string& id) override {
    return run("find sandbox " + id, [&](pqxx::connection& c) {
      auto r = pqxx::nontransaction(c).exec_params(
          std::string("SELECT ") + kSandboxCols + " FROM sandboxes WHERE id=$1", id);
      return r.empty() ? std::optional<SandboxRecord>()
                       : std::optional<SandboxRecord>(readSandbox(r[0]));
    });
  }
  Result<std::vector<SandboxRecord>> listSandboxes(const std::string& tenant_id,
                                                   const std::string& after_id,
                                                   int limit) override {
    return run("list sandboxes", [&](pqxx::connection& c) {
      return readSandboxes(pqxx::nontransaction(c).exec_params(
          std::string("SELECT ") + kSandboxCols +
              " FROM sandboxes WHERE tenant_id=$1 AND id>$2 AND state!='deleted'"
              " ORDER BY id LIMIT $3",
          tenant_id, after_id, int64_t{limit}));
    });
  }

  Status insertOperation(const OperationRecord& o) override {
    return exec0(
        "insert operation " + o.id,
        "INSERT INTO operations(id,tenant_id,sandbox_id,kind,state,error_code,"
        "error_message,created_ms,updated_ms,owner) VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)",
        o.id, o.tenant_id, o.sandbox_id, o.kind, str(opStateName(o.state)), o.error_code,
        o.error_message, o.created_ms, o.updated_ms, o.owner);
  }
  Status setOperationState(const std::string& id, OpState state, const std::string& error_code,
                           const std::string& error_message) override {
    // One conditional UPDATE: of two replicas finishing the same operation
    // (one ran it, the other gave it up for lost) the first wins.
    return run("update operation " + id, [&](pqxx::connection& c) -> Status {
      auto r = pqxx::nontransaction(c).exec_params(
          "UPDATE operations SET state=$1, error_code=$2, error_message=$3, updated_ms=$4 "
          "WHERE id=$5 AND state NOT IN ('done','failed')",
          str(opStateName(state)), error_code, error_message, nowMs(), id);
      if (r.affected_rows() == 0)
        return Error(Code::kFailedPrecondition,
                     "operation " + id + " has finished already or does not exist");
      return okStatus();
    });
  }
  Result<std::optional<OperationRecord>> getOperation(const std::string& tenant_id,
                                                      const std::string& id) override {
    return run("get operation " + id, [&](pqxx::connection& c) {
      auto r = pqxx::nontransaction(c).exec_params(
          std::string("SELECT ") + kOperationCols + " FROM operations WHERE tenant_id=$1 AND id=$2",
          tenant_id, id);
      return r.empty() ? std::optional<OperationRecord>()
                       : std::optional<OperationRecord>(readOperation(r[0]));
    });
  }

  Result<int64_t> appendEvent(const EventRecord& e) override {
    return run("append event", [&](pqxx::connection& c) {
      pqxx::work w(c);
      // Taken before the identity value and held to commit: sequence
      // numbers become visible in increasing order (see the top).
      w.exec_params("SELECT pg_advisory_xact_lock($1, hashtext($2))", kEventLockClass, e.tenant_id);
      auto r = w.exec_params1(
          "INSERT INTO events(tenant_id,operation_id,sandbox_id,type,data,at_ms) "
          "VALUES($1,$2,$3,$4,$5,$6) RETURNING seq",
          e.tenant_id, e.operation_id, e.sandbox_id, e.type, e.data_json,
          e.at_ms ? e.at_ms : nowMs());
      w.commit();
      return r[0].as<int64_t>();
    });
  }
  Result<std::vector<EventRecord>> listEvents(const std::string& tenant_id,
                                              const std::string& operation_id, int64_t after_seq,
                                              int limit) override {
    return run("list events", [&](pqxx::connection& c) {
      auto res = pqxx::nontransaction(c).exec_params(
          "SELECT seq,tenant_id,operation_id,sandbox_id,type,data,at_ms FROM events "
          "WHERE tenant_id=$1 AND ($2::text='' OR operation_id=$2) AND seq>$3 "
          "ORDER BY seq LIMIT $4",
          tenant_id, operation_id, after_seq, int64_t{limit});
      std::vector<EventRecord> out;
      for (const auto& r : res)
        out.push_back({r[0].as<int64_t>(), r[1].as<std::string>(), r[2].as<std::string>(),
                       r[3].as<std::string>(), r[4].as<std::string>(), r[5].as<std::string>(),
                       r[6].as<int64_t>()});
      return out;
    });
  }

  Status setTenantLimits(const std::string& tenant_id, const TenantLimits& l) override {
    return run("set limits of tenant " + tenant_id, [&](pqxx::connection& c) -> Status {
      auto r = pqxx::nontransaction(c).exec_params(
          "UPDATE tenants SET max_sandboxes=$1, max_memory_mib=$2, max_vcpus=$3, max_disk_mib=$4"
          " WHERE id=$5",
          l.max_sandboxes, l.max_memory_mib, l.max_vcpus, l.max_disk_mib, tenant_id);
      if (r.affected_rows() == 0)
        return Error(Code::kNotFound, "tenant " + tenant_id + " does not exist");
      return okStatus();
    });
  }
  Result<TenantLimits> tenantLimits(const std::string& tenant_id) override {
    return run("get limits of tenant " + tenant_id,
               [&](pqxx::connection& c) -> Result<TenantLimits> {
                 auto r = pqxx::nontransaction(c).exec_params(
                     "SELECT max_sandboxes, max_memory_mib, max_vcpus, max_disk_mib FROM tenants"
                     " WHERE id=$1",
                     tenant_id);
                 if (r.empty())
                   return Error(Code::kNotFound, "tenant " + tenant_id + " does not exist");
                 return TenantLimits{optionalInt(r[0][0]), optionalInt(r[0][1]),
                                     optionalInt(r[0][2]), optionalInt(r[0][3])};
               });
  }
  Result<TenantUsage> tenantUsage(const std::string& tenant_id) override {
    return run("usage of tenant " + tenant_id, [&](pqxx::connection& c) {
      pqxx::nontransaction t(c);
      return usageIn(t, tenant_id);
    });
  }

  Status setSandboxLifetime(const std::string& id, int64_t idle_timeout_s,
                            int64_t expires_ms) override {
    return exec0("set lifetime of sandbox " + id,
                 "UPDATE sandboxes SET idle_timeout_s=$1, expires_ms=$2, updated_ms=$3 WHERE id=$4",
                 idle_timeout_s, expires_ms, nowMs(), id);
  }
  Status touchSandbox(const std::string& id, int64_t at_ms) override {
    return exec0("touch sandbox " + id,
                 "UPDATE sandboxes SET last_active_ms=GREATEST(last_active_ms,$1) WHERE id=$2",
                 at_ms, id);
  }
  Result<std::vector<SandboxRecord>> listExpired(int64_t now_ms, int limit) override {
    return run("list expired sandboxes", [&](pqxx::connection& c) {
      return readSandboxes(pqxx::nontransaction(c).exec_params(
          std::string("SELECT ") + kSandboxCols +
              " FROM sandboxes WHERE state!='deleted' AND ("
              "(expires_ms>0 AND expires_ms<=$1) OR (state='running' AND idle_timeout_s>0"
              " AND last_active_ms+idle_timeout_s*1000<=$1)) ORDER BY id LIMIT $2",
          now_ms, int64_t{limit}));
    });
  }
  Result<std::vector<SandboxRecord>> listLiveSandboxes() override {
    return run("list live sandboxes", [&](pqxx::connection& c) {
      return readSandboxes(pqxx::nontransaction(c).exec(
          std::string("SELECT ") + kSandboxCols +
          " FROM sandboxes WHERE state NOT IN ('deleted','failed') ORDER BY id"));
    });
  }
  Result<std::vector<OperationRecord>> listUnfinishedOperations() override {
    return run("list unfinished operations", [&](pqxx::connection& c) {
      std::vector<OperationRecord> out;
      for (const auto& r : pqxx::nontransaction(c).exec(
               std::string("SELECT ") + kOperationCols +
               " FROM operations WHERE state IN ('pending','running') ORDER BY created_ms, id"))
        out.push_back(readOperation(r));
      return out;
    });
  }
  Result<std::vector<std::pair<SandboxState, int64_t>>> countSandboxesByState() override {
    return run("count sandboxes", [&](pqxx::connection& c) {
      std::vector<std::pair<SandboxState, int64_t>> out;
      for (const auto& r : pqxx::nontransaction(c).exec(
               "SELECT state, count(*) FROM sandboxes GROUP BY state ORDER BY state"))
        if (auto st = parseState(r[0].as<std::string>())) out.emplace_back(*st, r[1].as<int64_t>());
      return out;
    });
  }

  Status insertSession(const SessionRecord& s) override {
    return exec0("insert session for sandbox " + s.sandbox_id,
                 "INSERT INTO sessions(token_sha256,tenant_id,sandbox_id,created_ms,expires_ms) "
                 "VALUES($1,$2,$3,$4,$5)",
                 s.token_sha256, s.tenant_id, s.sandbox_id, s.created_ms, s.expires_ms);
  }
  Result<std::optional<SessionRecord>> sessionForToken(const std::string& token_sha256) override {
    return run("look up session", [&](pqxx::connection& c) {
      auto r = pqxx::nontransaction(c).exec_params(
          "SELECT token_sha256,tenant_id,sandbox_id,created_ms,expires_ms FROM sessions "
          "WHERE token_sha256=$1",
          token_sha256);
      if (r.empty()) return std::optional<SessionRecord>();
      return std::optional<SessionRecord>(
          SessionRecord{r[0][0].as<std::string>(), r[0][1].as<std::string>(),
                        r[0][2].as<std::string>(), r[0][3].as<int64_t>(), r[0][4].as<int64_t>()});
    });
  }
  Result<int> revokeSessions(const std::string& sandbox_id) override {
    return run("revoke sessions of sandbox " + sandbox_id, [&](pqxx::connection& c) {
      return static_cast<int>(
          pqxx::nontransaction(c)
              .exec_params("DELETE FROM sessions WHERE sandbox_id=$1", sandbox_id)
              .affected_rows());
    });
  }
  Result<int> deleteExpiredSessions(int64_t now_ms) override {
    return run("delete expired sessions", [&](pqxx::connection& c) {
      return static_cast<int>(pqxx::nontransaction(c)
                                  .exec_params("DELETE FROM sessions WHERE expires_ms<$1", now_ms)
                                  .affected_rows());
    });
  }

  Status putCredential(const CredentialRecord& c) override {
    return exec0("put credential " + c.name,
                 "INSERT INTO credentials(tenant_id,name,hosts,header,value,created_ms)"
                 " VALUES($1,$2,$3,$4,$5,$6) ON CONFLICT(tenant_id,name) DO UPDATE SET"
                 " hosts=excluded.hosts, header=excluded.header, value=excluded.value,"
                 " created_ms=excluded.created_ms",
                 c.tenant_id, c.name, c.hosts_json, c.header, c.value, c.created_ms);
  }
  Result<std::vector<CredentialRecord>> listCredentials(const std::string& tenant_id) override {
    return run("list credentials", [&](pqxx::connection& c) {
      std::vector<CredentialRecord> out;
      for (const auto& r : pqxx::nontransaction(c).exec_params(
               std::string("SELECT ") + kCredentialCols +
                   " FROM credentials WHERE tenant_id=$1 ORDER BY name",
               tenant_id))
        out.push_back(readCredential(r));
      return out;
    });
  }
  Result<std::optional<CredentialRecord>> getCredential(const std::string& tenant_id,
                                                        const std::string& name) override {
    return run("get credential " + name, [&](pqxx::connection& c) {
      auto r = pqxx::nontransaction(c).exec_params(
          std::string("SELECT ") + kCredentialCols +
              " FROM credentials WHERE tenant_id=$1 AND name=$2",
          tenant_id, name);
      return r.empty() ? std::optional<CredentialRecord>()
                       : std::optional<CredentialRecord>(readCredential(r[0]));
    });
  }
  Status deleteCredential(const std::string& tenant_id, const std::string& name) override {
    return exec0("delete credential " + name,
                 "DELETE FROM credentials WHERE tenant_id=$1 AND name=$2", tenant_id, name);
  }
  Status setSandboxNetwork(const std::string& sandbox_id, const std::string& json) override {
    return exec0("set network of " + sandbox_id,
                 "INSERT INTO sandbox_network(sandbox_id,settings) VALUES($1,$2) "
                 "ON CONFLICT(sandbox_id) DO UPDATE SET settings=excluded.settings",
                 sandbox_id, json);
  }
  Result<std::string> getSandboxNetwork(const std::string& sandbox_id) override {
    return run("get network of " + sandbox_id, [&](pqxx::connection& c) {
      auto r = pqxx::nontransaction(c).exec_params(
          "SELECT settings FROM sandbox_network WHERE sandbox_id=$1", sandbox_id);
      return r.empty() ? std::string() : r[0][0].as<std::string>();
    });
  }
  Status setSandboxIngress(const std::string& sandbox_id, const std::string& json) override {
    return exec0("set ingress of " + sandbox_id,
                 "INSERT INTO sandbox_ingress(sandbox_id,settings) VALUES($1,$2) "
                 "ON CONFLICT(sandbox_id) DO UPDATE SET settings=excluded.settings",
                 sandbox_id, json);
  }
  Result<std::string> getSandboxIngress(const std::string& sandbox_id) override {
    return run("get ingress of " + sandbox_id, [&](pqxx::connection& c) {
      auto r = pqxx::nontransaction(c).exec_params(
          "SELECT settings FROM sandbox_ingress WHERE sandbox_id=$1", sandbox_id);
      return r.empty() ? std::string() : r[0][0].as<std::string>();
    });
  }

  Status heartbeatNode(const NodeRecord& n) override {
    int64_t now = nowMs();
    return exec0("heartbeat of node " + n.name,
                 "INSERT INTO nodes(name,advertise_url,data_url,memory_mib,memory_free_mib,vcpus,"
                 "sandboxes,templates,accel,state,registered_ms,heartbeat_ms,envd_url) "
                 "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,'up',$10,$10,$11) ON CONFLICT(name) DO UPDATE "
                 "SET advertise_url=excluded.advertise_url, data_url=excluded.data_url,"
                 "envd_url=excluded.envd_url,"
                 "memory_mib=excluded.memory_mib, memory_free_mib=excluded.memory_free_mib,"
                 "vcpus=excluded.vcpus, sandboxes=excluded.sandboxes, templates=excluded.templates,"
                 "accel=excluded.accel, state='up', heartbeat_ms=excluded.heartbeat_ms",
                 n.name, n.advertise_url, n.data_url, static_cast<int64_t>(n.memory_mib),
                 static_cast<int64_t>(n.memory_free_mib), int64_t{n.vcpus}, n.sandboxes,
                 n.templates_json, n.accel, now, n.envd_url);
  }
  Result<std::vector<NodeRecord>> listNodes() override {
    return run("list nodes", [&](pqxx::connection& c) {
      auto res = pqxx::nontransaction(c).exec(
          "SELECT name,advertise_url,data_url,memory_mib,memory_free_mib,vcpus,sandboxes,"
          "templates,accel,state,registered_ms,heartbeat_ms,envd_url FROM nodes ORDER BY name");
      std::vector<NodeRecord> out;
      for (const auto& r : res) {
        NodeRecord n;
        n.name = r[0].as<std::string>();
        n.advertise_url = r[1].as<std::string>();
        n.data_url = r[2].as<std::string>();
        n.memory_mib = static_cast<uint64_t>(r[3].as<int64_t>());
        n.memory_free_mib = static_cast<uint64_t>(r[4].as<int64_t>());
        n.vcpus = static_cast<unsigned>(r[5].as<int64_t>());
        n.sandboxes = r[6].as<int64_t>();
        n.templates_json = r[7].as<std::string>();
        n.accel = r[8].as<std::string>();
        n.lost = r[9].as<std::string>() == "lost";
        n.registered_ms = r[10].as<int64_t>();
        n.heartbeat_ms = r[11].as<int64_t>();
        n.envd_url = r[12].as<std::string>();
        out.push_back(std::move(n));
      }
      return out;
    });
  }
  Result<bool> markNodeLost(const std::string& name, int64_t before_ms) override {
    // One conditional UPDATE: of replicas noticing together, one changes the row.
    return run("mark node " + name + " lost", [&](pqxx::connection& c) {
      auto r = pqxx::nontransaction(c).exec_params(
          "UPDATE nodes SET state='lost' WHERE name=$1 AND state='up' AND heartbeat_ms<$2", name,
          before_ms);
      return r.affected_rows() > 0;
    });
  }
  Status setSandboxNode(const std::string& sandbox_id, const std::string& node) override {
    return exec0("set node of sandbox " + sandbox_id, "UPDATE sandboxes SET node=$1 WHERE id=$2",
                 node, sandbox_id);
  }
  Result<std::string> sandboxNode(const std::string& sandbox_id) override {
    return run("node of sandbox " + sandbox_id, [&](pqxx::connection& c) {
      auto r =
          pqxx::nontransaction(c).exec_params("SELECT node FROM sandboxes WHERE id=$1", sandbox_id);
      return r.empty() ? std::string() : r[0][0].as<std::string>();
    });
  }
  Result<std::vector<SandboxRecord>> listNodeSandboxes(const std::string& node) override {
    return run("list sandboxes of node " + node, [&](pqxx::connection& c) {
      return readSandboxes(pqxx::nontransaction(c).exec_params(
          std::string("SELECT ") + kSandboxCols +
              " FROM sandboxes WHERE node=$1 AND state NOT IN ('deleted','failed') ORDER BY id",
          node));
    });
  }
  Status heartbeatReplica(const std::string& id) override {
    return exec0("heartbeat of replica " + id,
                 "INSERT INTO replicas(id,heartbeat_ms) VALUES($1,$2) ON CONFLICT(id) DO UPDATE "
                 "SET heartbeat_ms=excluded.heartbeat_ms",
                 id, nowMs());
  }
  Result<std::vector<std::string>> listStaleReplicas(int64_t before_ms) override {
    return run("list stale replicas", [&](pqxx::connection& c) {
      auto res = pqxx::nontransaction(c).exec_params(
          "SELECT id FROM replicas WHERE heartbeat_ms<$1 ORDER BY id", before_ms);
      std::vector<std::string> out;
      for (const auto& r : res) out.push_back(r[0].as<std::string>());
      return out;
    });
  }
  Result<std::vector<std::string>> listLiveReplicas(int64_t since_ms) override {
    return run("list live replicas", [&](pqxx::connection& c) {
      auto res = pqxx::nontransaction(c).exec_params(
          "SELECT id FROM replicas WHERE heartbeat_ms>=$1 ORDER BY id", since_ms);
      std::vector<std::string> out;
      for (const auto& r : res) out.push_back(r[0].as<std::string>());
      return out;
    });
  }
  Status deleteReplica(const std::string& id) override {
    return exec0("delete replica " + id, "DELETE FROM replicas WHERE id=$1", id);
  }
  Result<std::vector<OperationRecord>> claimOperations(const std::string& from,
                                                       const std::string& to) override {
    // One UPDATE: a row another replica claimed first no longer matches
    // `owner=$2` when this one re-checks it after waiting for its lock.
    return run("claim operations of " + from, [&](pqxx::connection& c) {
      auto res = pqxx::nontransaction(c).exec_params(
          std::string("UPDATE operations SET owner=$1 WHERE owner=$2 AND state IN "
                      "('pending','running') RETURNING ") +
              kOperationCols,
          to, from);
      std::vector<OperationRecord> out;
      for (const auto& r : res) out.push_back(readOperation(r));
      std::sort(out.begin(), out.end(),
                [](const auto& a, const auto& b) { return a.created_ms < b.created_ms; });
      return out;
    });
  }

  // The template catalogue.
  static constexpr const char* kTemplateCols =
      "name,version,tenant_id,manifest,sizes,created_at,registered_ms,deleted_ms";
  static TemplateRecord readTemplate(const pqxx::row& r) {
    TemplateRecord t;
    t.name = r[0].as<std::string>();
    t.version = r[1].as<std::string>();
    t.tenant_id = r[2].as<std::string>();
    t.manifest_json = r[3].as<std::string>();
    t.sizes_json = r[4].as<std::string>();
    t.created_at = r[5].as<std::string>();
    t.registered_ms = r[6].as<int64_t>();
    t.deleted = r[7].as<int64_t>() != 0;
    return t;
  }
  Status putTemplate(const TemplateRecord& t, bool revive) override {
    std::string sql = std::string("INSERT INTO templates(") + kTemplateCols +
                      ") VALUES($1,$2,$3,$4,$5,$6,$7,0) ON CONFLICT(name,version) DO " +
                      (revive ? "UPDATE SET tenant_id=excluded.tenant_id,"
                                "manifest=excluded.manifest, sizes=excluded.sizes,"
                                "created_at=excluded.created_at,"
                                "registered_ms=excluded.registered_ms, deleted_ms=0"
                              : "NOTHING");
    return exec0("register template " + t.name + "@" + t.version, sql.c_str(), t.name, t.version,
                 t.tenant_id, t.manifest_json, t.sizes_json, t.created_at, nowMs());
  }
  Result<std::vector<TemplateRecord>> listTemplates(bool with_deleted) override {
    return run("list templates", [&](pqxx::connection& c) {
      std::vector<TemplateRecord> out;
      for (const auto& r : pqxx::nontransaction(c).exec(
               std::string("SELECT ") + kTemplateCols + " FROM templates" +
               (with_deleted ? "" : " WHERE deleted_ms=0") + " ORDER BY name, created_at, version"))
        out.push_back(readTemplate(r));
      return out;
    });
  }
  Result<std::optional<TemplateRecord>> getTemplate(const std::string& name,
                                                    const std::string& version) override {
    return run("get template " + name, [&](pqxx::connection& c) {
      // An empty version matches every version: the newest is taken.
      auto r = pqxx::nontransaction(c).exec_params(
          std::string("SELECT ") + kTemplateCols +
              " FROM templates WHERE name=$1 AND deleted_ms=0 AND ($2='' OR version=$2)"
              " ORDER BY created_at DESC, version DESC LIMIT 1",
          name, version);
      return r.empty() ? std::optional<TemplateRecord>()
                       : std::optional<TemplateRecord>(readTemplate(r[0]));
    });
  }
  Status deleteTemplate(const std::string& name, const std::string& version) override {
    auto n = run("delete template " + name + "@" + version, [&](pqxx::connection& c) {
      return static_cast<int64_t>(
          pqxx::nontransaction(c)
              .exec_params("UPDATE templates SET deleted_ms=$1 WHERE name=$2 AND version=$3 AND "
                           "deleted_ms=0",
                           nowMs(), name, version)
              .affected_rows());
    });
    if (!n.ok()) return std::move(n).error();
    if (*n == 0)
      return Error(Code::kNotFound, "template " + name + "@" + version + " does not exist");
    return okStatus();
  }

 private:
  int64_t nowMs() const { return clock_.nowMs(); }

  static void insertSandboxIn(pqxx::transaction_base& t, const SandboxRecord& s) {
    t.exec_params(
        "INSERT INTO sandboxes(id,tenant_id,template,state,error,vcpus,memory_mib,"
        "metadata,created_ms,updated_ms,idle_timeout_s,expires_ms,last_active_ms,disk_mib,node,"
        "on_timeout,pause_memory,auto_resume,lifetime_s) "
        "VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19)",
        s.id, s.tenant_id, s.template_name, str(stateName(s.state)), s.error, int64_t{s.vcpus},
        static_cast<int64_t>(s.memory_mib), s.metadata_json, s.created_ms, s.updated_ms,
        s.idle_timeout_s, s.expires_ms, s.last_active_ms, static_cast<int64_t>(s.disk_mib), s.node,
        str(s.pause_on_timeout ? "pause" : "delete"), int64_t{s.pause_memory},
        int64_t{s.auto_resume}, s.lifetime_s);
  }
  // Sandboxes not deleted or failed, and the memory of those holding a VM.
  static TenantUsage usageIn(pqxx::transaction_base& t, const std::string& tenant_id) {
    auto r = t.exec_params1(
        "SELECT count(*), coalesce(sum(CASE WHEN state!='paused' THEN memory_mib ELSE 0 END),"
        " 0)::bigint, coalesce(sum(CASE WHEN state!='paused' THEN vcpus ELSE 0 END), 0)::bigint,"
        " coalesce(sum(disk_mib + CASE WHEN state='paused' THEN memory_mib ELSE 0 END), 0)::bigint"
        " FROM sandboxes WHERE tenant_id=$1 AND state NOT IN ('deleted','failed')",
        tenant_id);
    return TenantUsage{r[0].as<int64_t>(), r[1].as<int64_t>(), r[2].as<int64_t>(),
                       r[3].as<int64_t>()};
  }

  // Runs `body` on the connection (made on first use, and again after it
  // broke) and turns libpqxx's exceptions into Errors: none leave the store.
  // A unique key violation is kAlreadyExists as with SQLite; another
  // constraint (a foreign key) is kFailedPrecondition.
  template <typename F>
  auto run(const std::string& what, F&& body) ->
      typename AsResult<std::invoke_result_t<F, pqxx::connection&>>::type {
    auto fail = [&](Code code, const std::string& m) {
      return Error(code, "postgres " + shown_ + ": " + what + ": " + m);
    };
    std::lock_guard lock(mu_);
    try {
      if (!conn_ || !conn_->is_open()) {
        conn_ = std::make_unique<pqxx::connection>(conninfo_);
        // The io thread waits for every statement: none may hold it for
        // long (a lock held by a stuck replica, a server in trouble).
        pqxx::nontransaction(*conn_).exec("SET statement_timeout = '30s'");
      }
      return body(*conn_);
    } catch (const pqxx::broken_connection& e) {
      conn_.reset();  // the next call connects again
      return fail(Code::kUnavailable, e.what());
    } catch (const pqxx::unique_violation& e) {
      return fail(Code::kAlreadyExists, e.what());
    } catch (const pqxx::integrity_constraint_violation& e) {
      return fail(Code::kFailedPrecondition, e.what());
    } catch (const std::exception& e) {
      return fail(Code::kUnavailable, e.what());
    }
  }
  template <typename... Args>
  Status exec0(const std::string& what, const char* sql, Args&&... args) {
    return run(what, [&](pqxx::connection& c) -> Status {
      pqxx::nontransaction(c).exec_params(sql, std::forward<Args>(args)...);
      return okStatus();
    });
  }

  const std::string conninfo_;
  const std::string shown_;  // the URL without its password, for messages
  const WallClock& clock_;
  // libpqxx connections are not thread-safe; calls come from the io thread,
  // but nothing here should depend on that.
  std::mutex mu_;
  std::unique_ptr<pqxx::connection> conn_;  // GUARDED_BY(mu_)
  int version_ = 0;
};

}  // namespace

std::string redactUrl(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos) {
    // key=value form: hide password=...
    auto at = url.find("password=");
    if (at == std::string::npos) return url;
    auto end = url.find(' ', at);
    return url.substr(0, at) + "password=***" + (end == std::string::npos ? "" : url.substr(end));
  }
  auto at = url.find('@', scheme + 3);
  auto slash = url.find('/', scheme + 3);
  if (at == std::string::npos || (slash != std::string::npos && slash < at)) return url;
  auto colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon) + ":***" + url.substr(at);
}

namespace {
// Store calls block the io thread, so an unreachable server must not hold
// it for the kernel's TCP connect timeout (minutes): connect_timeout
// unless the URL sets one. Nor may a server whose link goes away while a
// reply is on its way (a node cut off from the network): TCP keepalives
// and tcp_user_timeout end such a connection in seconds, and the next
// call connects again. (Ignored on a Unix socket.)
std::string withConnectTimeout(const std::string& url) {
  std::string out = url;
  const bool uri = url.find("://") != std::string::npos;
  bool query = url.find('?') != std::string::npos;
  for (const char* kv : {"connect_timeout=5", "keepalives=1", "keepalives_idle=5",
                         "keepalives_interval=2", "keepalives_count=3", "tcp_user_timeout=10000"}) {
    std::string key(kv, std::string_view(kv).find('=') + 1);
    if (url.find(key) != std::string::npos) continue;
    if (!uri) {
      out += std::string(" ") + kv;
    } else {
      out += (query ? "&" : "?") + std::string(kv);
      query = true;
    }
  }
  return out;
}
}  // namespace

Result<std::unique_ptr<Store>> openPostgres(const std::string& url, const WallClock* clock) {
  auto s = std::make_unique<PostgresStore>(withConnectTimeout(url), redactUrl(url),
                                           clock ? *clock : systemWallClock());
  VESSEL_TRY_CTX(s->migrate(), "open database " + redactUrl(url));
  return std::unique_ptr<Store>(std::move(s));
}

}  // namespace vessel::store
