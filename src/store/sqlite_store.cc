#include <sqlite3.h>

#include <chrono>
#include <set>
#include <vector>

#include "store/migrations.h"
#include "store/store.h"

namespace vessel::store {

namespace {

// A prepared statement that finalizes itself; bind() takes values in order.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) != SQLITE_OK) st_ = nullptr;
  }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  bool ok() const { return st_ != nullptr; }
  Stmt& bind(const std::string& v) {
    sqlite3_bind_text(st_, ++n_, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bind(int64_t v) {
    sqlite3_bind_int64(st_, ++n_, v);
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int step() { return st_ ? sqlite3_step(st_) : SQLITE_ERROR; }
  std::string text(int col) const {
    const unsigned char* p = sqlite3_column_text(st_, col);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(st_, col)))
             : std::string();
  }
  int64_t integer(int col) const { return sqlite3_column_int64(st_, col); }
  bool isNull(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }
  Stmt& bindOpt(const std::optional<int64_t>& v) {
    if (v)
      sqlite3_bind_int64(st_, ++n_, *v);
    else
      sqlite3_bind_null(st_, ++n_);
    return *this;
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
  int n_ = 0;
};

constexpr const char* kSandboxCols =
    "id,tenant_id,template,state,error,vcpus,memory_mib,metadata,created_ms,updated_ms,"
    "idle_timeout_s,expires_ms,last_active_ms,disk_mib,node,on_timeout,pause_memory,auto_resume,"
    "lifetime_s";
SandboxRecord readSandbox(const Stmt& s) {
  SandboxRecord r;
  r.id = s.text(0);
  r.tenant_id = s.text(1);
  r.template_name = s.text(2);
  r.state = parseState(s.text(3)).value_or(SandboxState::kFailed);
  r.error = s.text(4);
  r.vcpus = static_cast<unsigned>(s.integer(5));
  r.memory_mib = static_cast<uint64_t>(s.integer(6));
  r.metadata_json = s.text(7);
  r.created_ms = s.integer(8);
  r.updated_ms = s.integer(9);
  r.idle_timeout_s = s.integer(10);
  r.expires_ms = s.integer(11);
  r.last_active_ms = s.integer(12);
  r.disk_mib = static_cast<uint64_t>(s.integer(13));
  r.node = s.text(14);
  r.pause_on_timeout = s.text(15) == "pause";
  r.pause_memory = s.integer(16) != 0;
  r.auto_resume = s.integer(17) != 0;
  r.lifetime_s = s.integer(18);
  return r;
}

constexpr const char* kOperationCols =
    "id,tenant_id,sandbox_id,kind,state,error_code,error_message,created_ms,updated_ms,owner";
OperationRecord readOperation(const Stmt& s) {
  OperationRecord o;
  o.id = s.text(0);
  o.tenant_id = s.text(1);
  o.sandbox_id = s.text(2);
  o.kind = s.text(3);
  o.state = parseOpState(s.text(4)).value_or(OpState::kFailed);
  o.error_code = s.text(5);
  o.error_message = s.text(6);
  o.created_ms = s.integer(7);
  o.updated_ms = s.integer(8);
  o.owner = s.text(9);
  return o;
}

class SqliteStore : public Store {
 public:
  SqliteStore(sqlite3* db, const WallClock& clock) : db_(db), clock_(clock) {}
  int64_t nowMs() const { return clock_.nowMs(); }
  ~SqliteStore() override { sqlite3_close_v2(db_); }

  std::string_view engine() const override { return "sqlite"; }
  int schemaVersion() const override { return version_; }

  Status init() {
    // The busy timeout first: switching to WAL takes a lock that another
    // opener (the CLI, a second store in a test) may hold for a moment.
    sqlite3_busy_timeout(db_, 5000);
    VESSEL_TRY(exec("PRAGMA journal_mode=WAL;"));
    VESSEL_TRY(exec("PRAGMA synchronous=NORMAL;"));
    VESSEL_TRY(exec("PRAGMA foreign_keys=ON;"));
    VESSEL_TRY(migrate());
    return okStatus();
  }

  Status migrate() {
    const auto known = migrations(Dialect::kSqlite);
    int max_known = known.back().number;
    VESSEL_ASSIGN_OR_RETURN(int legacy, userVersion());
    VESSEL_TRY(exec("BEGIN IMMEDIATE;"));
    auto rollback = [&](Error e) {
      (void)exec("ROLLBACK;");
      return e;
    };
    bool had_table = false;
    {
      Stmt t(db_, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'");
      had_table = t.step() == SQLITE_ROW;
    }
    if (!had_table) {
      if (legacy > max_known)
        return rollback(Error(Code::kFailedPrecondition, "database schema version " +
                                                             std::to_string(legacy) +
                                                             " is newer than this vesseld knows (" +
                                                             std::to_string(max_known) + ")"));
      // Databases from before numbered migrations counted them in
      // user_version, which then meant "1..N applied".
      if (auto s = exec("CREATE TABLE schema_migrations (number INTEGER PRIMARY KEY,"
                        " applied_ms INTEGER NOT NULL);");
          !s.ok())
        return rollback(std::move(s).error());
      for (int n = 1; n <= legacy; ++n) {
        Stmt ins(db_, "INSERT INTO schema_migrations(number, applied_ms) VALUES(?,?)");
        ins.bind(int64_t{n}).bind(nowMs());
        if (auto s = done(ins, "record migration"); !s.ok()) return rollback(std::move(s).error());
      }
    }
    std::set<int> applied;
    {
      Stmt q(db_, "SELECT number FROM schema_migrations");
      while (q.step() == SQLITE_ROW) applied.insert(static_cast<int>(q.integer(0)));
    }
    if (auto s = checkKnown(applied); !s.ok()) return rollback(std::move(s).error());
    for (const auto& m : known) {
      if (applied.count(m.number)) continue;
      Stmt ins(db_, "INSERT INTO schema_migrations(number, applied_ms) VALUES(?,?)");
      ins.bind(int64_t{m.number}).bind(nowMs());
      Status s = exec(m.sql.c_str());
      if (s.ok()) s = done(ins, "record migration");
      if (!s.ok())
        return rollback(std::move(s).error().withContext("migration " + std::to_string(m.number)));
      applied.insert(m.number);
    }
    version_ = *applied.rbegin();
    std::string uv = "PRAGMA user_version=" + std::to_string(version_) + ";COMMIT;";
    if (auto s = exec(uv.c_str()); !s.ok()) return rollback(std::move(s).error());
    return okStatus();
  }

  Result<std::optional<std::string>> getMeta(const std::string& key) override {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, "SELECT value FROM meta WHERE key=?", -1, &st, nullptr) !=
        SQLITE_OK)
      return err("prepare");
    sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
    std::optional<std::string> out;
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
      out = std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return err("get meta " + key);
    return out;
  }

  Result<std::string> getOrSetMeta(const std::string& key, const std::string& value) override {
    {
      Stmt s(db_, "INSERT INTO meta(key,value) VALUES(?,?) ON CONFLICT(key) DO NOTHING");
      s.bind(key).bind(value);
      VESSEL_TRY(done(s, "set meta " + key));
    }
    VESSEL_ASSIGN_OR_RETURN(auto v, getMeta(key));
    if (!v) return Error(Code::kInternal, "meta " + key + " vanished");
    return *v;
  }

  Status setMeta(const std::string& key, const std::string& value) override {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_,
                           "INSERT INTO meta(key,value) VALUES(?,?) "
                           "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                           -1, &st, nullptr) != SQLITE_OK)
      return err("prepare");
    sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, value.c_str(), -1, SQLITE_TRANSIENT);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return err("set meta " + key);
    return okStatus();
  }

  Status createTenant(const std::string& id, const std::string& name) override {
    Stmt s(db_, "INSERT INTO tenants(id,name,created_ms) VALUES(?,?,?)");
    s.bind(id).bind(name).bind(nowMs());
    return done(s, "create tenant " + id);
  }
  Result<int64_t> countTenants() override {
    Stmt s(db_, "SELECT count(*) FROM tenants");
    if (s.step() != SQLITE_ROW) return err("count tenants");
    return s.integer(0);
  }
  Status addApiKey(const std::string& tenant_id, const std::string& key_sha256) override {
    Stmt s(db_, "INSERT INTO api_keys(key_sha256,tenant_id,created_ms) VALUES(?,?,?)");
    s.bind(key_sha256).bind(tenant_id).bind(nowMs());
    return done(s, "add api key for tenant " + tenant_id);
  }
  Result<std::optional<std::string>> tenantForKey(const std::string& key_sha256) override {
    Stmt s(db_, "SELECT tenant_id FROM api_keys WHERE key_sha256=?");
    s.bind(key_sha256);
    int rc = s.step();
    if (rc == SQLITE_ROW) return std::optional<std::string>(s.text(0));
    if (rc != SQLITE_DONE) return err("look up api key");
    return std::optional<std::string>();
  }

  Status putCredential(const CredentialRecord& c) override {
    Stmt s(db_,
           "INSERT OR REPLACE INTO credentials(tenant_id,name,hosts,header,value,created_ms)"
           " VALUES(?,?,?,?,?,?)");
    s.bind(c.tenant_id).bind(c.name).bind(c.hosts_json).bind(c.header).bind(c.value);
    s.bind(c.created_ms);
    return done(s, "put credential " + c.name);
  }
  static CredentialRecord readCredential(const Stmt& s) {
    CredentialRecord c;
    c.tenant_id = s.text(0);
    c.name = s.text(1);
    c.hosts_json = s.text(2);
    c.header = s.text(3);
    c.value = s.text(4);
    c.created_ms = s.integer(5);
    return c;
  }
  Result<std::vector<CredentialRecord>> listCredentials(const std::string& tenant_id) override {
    Stmt s(db_,
           "SELECT tenant_id,name,hosts,header,value,created_ms FROM credentials"
           " WHERE tenant_id=? ORDER BY name");
    s.bind(tenant_id);
    std::vector<CredentialRecord> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) out.push_back(readCredential(s));
    if (rc != SQLITE_DONE) return err("list credentials");
    return out;
  }
  Result<std::optional<CredentialRecord>> getCredential(const std::string& tenant_id,
                                                        const std::string& name) override {
    Stmt s(db_,
           "SELECT tenant_id,name,hosts,header,value,created_ms FROM credentials"
           " WHERE tenant_id=? AND name=?");
    s.bind(tenant_id).bind(name);
    int rc = s.step();
    if (rc == SQLITE_ROW) return std::optional<CredentialRecord>(readCredential(s));
    if (rc != SQLITE_DONE) return err("get credential " + name);
    return std::optional<CredentialRecord>();
  }
  Status deleteCredential(const std::string& tenant_id, const std::string& name) override {
    Stmt s(db_, "DELETE FROM credentials WHERE tenant_id=? AND name=?");
    s.bind(tenant_id).bind(name);
    return done(s, "delete credential " + name);
  }
  Status setSandboxNetwork(const std::string& sandbox_id, const std::string& json) override {
    Stmt s(db_, "INSERT OR REPLACE INTO sandbox_network(sandbox_id,settings) VALUES(?,?)");
    s.bind(sandbox_id).bind(json);
    return done(s, "set network of " + sandbox_id);
  }
  Result<std::string> getSandboxNetwork(const std::string& sandbox_id) override {
    Stmt s(db_, "SELECT settings FROM sandbox_network WHERE sandbox_id=?");
    s.bind(sandbox_id);
    int rc = s.step();
    if (rc == SQLITE_ROW) return s.text(0);
    if (rc != SQLITE_DONE) return err("get network of " + sandbox_id);
    return std::string();
  }
  Status setSandboxIngress(const std::string& sandbox_id, const std::string& json) override {
    Stmt s(db_, "INSERT OR REPLACE INTO sandbox_ingress(sandbox_id,settings) VALUES(?,?)");
    s.bind(sandbox_id).bind(json);
    return done(s, "set ingress of " + sandbox_id);
  }
  Result<std::string> getSandboxIngress(const std::string& sandbox_id) override {
    Stmt s(db_, "SELECT settings FROM sandbox_ingress WHERE sandbox_id=?");
    s.bind(sandbox_id);
    int rc = s.step();
    if (rc == SQLITE_ROW) return s.text(0);
    if (rc != SQLITE_DONE) return err("get ingress of " + sandbox_id);
    return std::string();
  }

  Status insertSandbox(const SandboxRecord& r) override {
    Stmt s(db_,
           "INSERT INTO sandboxes(id,tenant_id,template,state,error,vcpus,memory_mib,metadata,"
           "created_ms,updated_ms,idle_timeout_s,expires_ms,last_active_ms,disk_mib,node,"
           "on_timeout,pause_memory,auto_resume,lifetime_s) "
           "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    s.bind(r.id).bind(r.tenant_id).bind(r.template_name).bind(std::string(stateName(r.state)));
    s.bind(r.error);
    s.bind(int64_t{r.vcpus}).bind(static_cast<int64_t>(r.memory_mib)).bind(r.metadata_json);
    s.bind(r.created_ms).bind(r.updated_ms);
    s.bind(r.idle_timeout_s).bind(r.expires_ms).bind(r.last_active_ms);
    s.bind(static_cast<int64_t>(r.disk_mib)).bind(r.node);
    s.bind(std::string(r.pause_on_timeout ? "pause" : "delete"));
    s.bind(int64_t{r.pause_memory}).bind(int64_t{r.auto_resume}).bind(r.lifetime_s);
    return done(s, "insert sandbox " + r.id);
  }
  Status insertSandboxAdmitted(const SandboxRecord& r, const Admission& admit) override {
    // BEGIN IMMEDIATE takes the database's write lock before the reads, so
    // no other connection's insert lands between the check and this one.
    VESSEL_TRY(exec("BEGIN IMMEDIATE;"));
    Status st = [&]() -> Status {
      VESSEL_ASSIGN_OR_RETURN(TenantLimits l, tenantLimits(r.tenant_id));
      VESSEL_ASSIGN_OR_RETURN(TenantUsage u, tenantUsage(r.tenant_id));
      if (auto refused = admit(l, u)) return *refused;
      VESSEL_TRY(insertSandbox(r));
      return exec("COMMIT;");
    }();
    if (!st.ok()) (void)exec("ROLLBACK;");
    return st;
  }
  Status setSandboxState(const std::string& id, SandboxState state,
                         const std::string& error) override {
    Stmt s(db_, "UPDATE sandboxes SET state=?, error=?, updated_ms=? WHERE id=?");
    s.bind(std::string(stateName(state))).bind(error).bind(nowMs()).bind(id);
    return done(s, "update sandbox " + id);
  }
  Result<std::optional<SandboxRecord>> getSandbox(const std::string& tenant_id,
                                                  const std::string& id) override {
    std::string sql =
        std::string("SELECT ") + kSandboxCols + " FROM sandboxes WHERE tenant_id=? AND id=?";
    Stmt s(db_, sql.c_str());
    s.bind(tenant_id).bind(id);
    int rc = s.step();
    if (rc == SQLITE_ROW) return std::optional<SandboxRecord>(readSandbox(s));
    if (rc != SQLITE_DONE) return err("get sandbox " + id);
    return std::optional<SandboxRecord>();
  }
  Result<std::optional<SandboxRecord>> findSandbox(const std::string& id) override {
    std::string sql = std::string("SELECT ") + kSandboxCols + " FROM sandboxes WHERE id=?";
    Stmt s(db_, sql.c_str());
    s.bind(id);
    int rc = s.step();
    if (rc == SQLITE_ROW) return std::optional<SandboxRecord>(readSandbox(s));
    if (rc != SQLITE_DONE) return err("find sandbox " + id);
    return std::optional<SandboxRecord>();
  }
  Result<std::vector<SandboxRecord>> listSandboxes(const std::string& tenant_id,
                                                   const std::string& after_id,
                                                   int limit) override {
    std::string sql = std::string("SELECT ") + kSandboxCols +
                      " FROM sandboxes WHERE tenant_id=? AND id>? AND state!='deleted'"
                      " ORDER BY id LIMIT ?";
    Stmt s(db_, sql.c_str());
    s.bind(tenant_id).bind(after_id).bind(int64_t{limit});
    std::vector<SandboxRecord> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) out.push_back(readSandbox(s));
    if (rc != SQLITE_DONE) return err("list sandboxes");
    return out;
  }

  Status insertOperation(const OperationRecord& o) override {
    Stmt s(db_,
           "INSERT INTO operations(id,tenant_id,sandbox_id,kind,state,error_code,error_message,"
           "created_ms,updated_ms,owner) VALUES(?,?,?,?,?,?,?,?,?,?)");
    s.bind(o.id).bind(o.tenant_id).bind(o.sandbox_id).bind(o.kind);
    s.bind(std::string(opStateName(o.state)));
    s.bind(o.error_code).bind(o.error_message).bind(o.created_ms).bind(o.updated_ms).bind(o.owner);
    return done(s, "insert operation " + o.id);
  }
  Status setOperationState(const std::string& id, OpState state, const std::string& error_code,
                           const std::string& error_message) override {
    Stmt s(db_,
           "UPDATE operations SET state=?, error_code=?, error_message=?, updated_ms=? "
           "WHERE id=? AND state NOT IN ('done','failed')");
    s.bind(std::string(opStateName(state))).bind(error_code).bind(error_message);
    s.bind(nowMs()).bind(id);
    VESSEL_TRY(done(s, "update operation " + id));
    if (sqlite3_changes(db_) == 0)
      return Error(Code::kFailedPrecondition,
                   "operation " + id + " has finished already or does not exist");
    return okStatus();
  }
  Result<std::optional<OperationRecord>> getOperation(const std::string& tenant_id,
                                                      const std::string& id) override {
    std::string sql =
        std::string("SELECT ") + kOperationCols + " FROM operations WHERE tenant_id=? AND id=?";
    Stmt s(db_, sql.c_str());
    s.bind(tenant_id).bind(id);
    int rc = s.step();
    if (rc != SQLITE_ROW) {
      if (rc != SQLITE_DONE) return err("get operation " + id);
      return std::optional<OperationRecord>();
    }
    return std::optional<OperationRecord>(readOperation(s));
  }

  Status setTenantLimits(const std::string& tenant_id, const TenantLimits& l) override {
    Stmt s(db_,
           "UPDATE tenants SET max_sandboxes=?, max_memory_mib=?, max_vcpus=?, max_disk_mib=?"
           " WHERE id=?");
    s.bindOpt(l.max_sandboxes).bindOpt(l.max_memory_mib).bindOpt(l.max_vcpus);
    s.bindOpt(l.max_disk_mib).bind(tenant_id);
    VESSEL_TRY(done(s, "set limits of tenant " + tenant_id));
    if (sqlite3_changes(db_) == 0)
      return Error(Code::kNotFound, "tenant " + tenant_id + " does not exist");
    return okStatus();
  }
  Result<TenantLimits> tenantLimits(const std::string& tenant_id) override {
    Stmt s(db_,
           "SELECT max_sandboxes, max_memory_mib, max_vcpus, max_disk_mib FROM tenants WHERE id=?");
    s.bind(tenant_id);
    int rc = s.step();
    if (rc != SQLITE_ROW) {
      if (rc != SQLITE_DONE) return err("get limits of tenant " + tenant_id);
      return Error(Code::kNotFound, "tenant " + tenant_id + " does not exist");
    }
    TenantLimits l;
    if (!s.isNull(0)) l.max_sandboxes = s.integer(0);
    if (!s.isNull(1)) l.max_memory_mib = s.integer(1);
    if (!s.isNull(2)) l.max_vcpus = s.integer(2);
    if (!s.isNull(3)) l.max_disk_mib = s.integer(3);
    return l;
  }
  Result<TenantUsage> tenantUsage(const std::string& tenant_id) override {
    Stmt s(db_,
           "SELECT count(*), coalesce(sum(CASE WHEN state!='paused' THEN memory_mib ELSE 0 END),0),"
           " coalesce(sum(CASE WHEN state!='paused' THEN vcpus ELSE 0 END),0),"
           " coalesce(sum(disk_mib + CASE WHEN state='paused' THEN memory_mib ELSE 0 END),0)"
           " FROM sandboxes WHERE tenant_id=? AND state NOT IN ('deleted','failed')");
    s.bind(tenant_id);
    if (s.step() != SQLITE_ROW) return err("usage of tenant " + tenant_id);
    return TenantUsage{s.integer(0), s.integer(1), s.integer(2), s.integer(3)};
  }

  Status setSandboxLifetime(const std::string& id, int64_t idle_timeout_s,
                            int64_t expires_ms) override {
    Stmt s(db_, "UPDATE sandboxes SET idle_timeout_s=?, expires_ms=?, updated_ms=? WHERE id=?");
    s.bind(idle_timeout_s).bind(expires_ms).bind(nowMs()).bind(id);
    return done(s, "set lifetime of sandbox " + id);
  }
  Status touchSandbox(const std::string& id, int64_t at_ms) override {
    Stmt s(db_, "UPDATE sandboxes SET last_active_ms=max(last_active_ms,?) WHERE id=?");
    s.bind(at_ms).bind(id);
    return done(s, "touch sandbox " + id);
  }
  Result<std::vector<SandboxRecord>> listExpired(int64_t now_ms, int limit) override {
    std::string sql = std::string("SELECT ") + kSandboxCols +
                      " FROM sandboxes WHERE state!='deleted' AND ("
                      "(expires_ms>0 AND expires_ms<=?) OR (state='running' AND idle_timeout_s>0"
                      " AND last_active_ms+idle_timeout_s*1000<=?)) ORDER BY id LIMIT ?";
    Stmt s(db_, sql.c_str());
    s.bind(now_ms).bind(now_ms).bind(int64_t{limit});
    return collect(s, "list expired sandboxes");
  }
  Result<std::vector<SandboxRecord>> listLiveSandboxes() override {
    std::string sql = std::string("SELECT ") + kSandboxCols +
                      " FROM sandboxes WHERE state NOT IN ('deleted','failed') ORDER BY id";
    Stmt s(db_, sql.c_str());
    return collect(s, "list live sandboxes");
  }
  Result<std::vector<OperationRecord>> listUnfinishedOperations() override {
    std::string sql = std::string("SELECT ") + kOperationCols +
                      " FROM operations WHERE state IN ('pending','running') ORDER BY created_ms";
    Stmt s(db_, sql.c_str());
    std::vector<OperationRecord> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) out.push_back(readOperation(s));
    if (rc != SQLITE_DONE) return err("list unfinished operations");
    return out;
  }
  Result<std::vector<std::pair<SandboxState, int64_t>>> countSandboxesByState() override {
    Stmt s(db_, "SELECT state, count(*) FROM sandboxes GROUP BY state ORDER BY state");
    std::vector<std::pair<SandboxState, int64_t>> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW)
      if (auto st = parseState(s.text(0))) out.emplace_back(*st, s.integer(1));
    if (rc != SQLITE_DONE) return err("count sandboxes");
    return out;
  }

  Result<int64_t> appendEvent(const EventRecord& e) override {
    Stmt s(db_,
           "INSERT INTO events(tenant_id,operation_id,sandbox_id,type,data,at_ms) "
           "VALUES(?,?,?,?,?,?)");
    s.bind(e.tenant_id).bind(e.operation_id).bind(e.sandbox_id).bind(e.type).bind(e.data_json);
    s.bind(e.at_ms ? e.at_ms : nowMs());
    VESSEL_TRY(done(s, "append event"));
    return static_cast<int64_t>(sqlite3_last_insert_rowid(db_));
  }
  Result<std::vector<EventRecord>> listEvents(const std::string& tenant_id,
                                              const std::string& operation_id, int64_t after_seq,
                                              int limit) override {
    Stmt s(db_,
           "SELECT seq,tenant_id,operation_id,sandbox_id,type,data,at_ms FROM events "
           "WHERE tenant_id=? AND (?='' OR operation_id=?) AND seq>? ORDER BY seq LIMIT ?");
    s.bind(tenant_id).bind(operation_id).bind(operation_id).bind(after_seq).bind(int64_t{limit});
    std::vector<EventRecord> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW)
      out.push_back(
          {s.integer(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5), s.integer(6)});
    if (rc != SQLITE_DONE) return err("list events");
    return out;
  }

  Status insertSession(const SessionRecord& r) override {
    Stmt s(db_,
           "INSERT INTO sessions(token_sha256,tenant_id,sandbox_id,created_ms,expires_ms) "
           "VALUES(?,?,?,?,?)");
    s.bind(r.token_sha256).bind(r.tenant_id).bind(r.sandbox_id).bind(r.created_ms);
    s.bind(r.expires_ms);
    return done(s, "insert session for sandbox " + r.sandbox_id);
  }
  Result<std::optional<SessionRecord>> sessionForToken(const std::string& token_sha256) override {
    Stmt s(db_,
           "SELECT token_sha256,tenant_id,sandbox_id,created_ms,expires_ms FROM sessions "
           "WHERE token_sha256=?");
    s.bind(token_sha256);
    int rc = s.step();
    if (rc == SQLITE_ROW)
      return std::optional<SessionRecord>(
          SessionRecord{s.text(0), s.text(1), s.text(2), s.integer(3), s.integer(4)});
    if (rc != SQLITE_DONE) return err("look up session");
    return std::optional<SessionRecord>();
  }
  Result<int> revokeSessions(const std::string& sandbox_id) override {
    Stmt s(db_, "DELETE FROM sessions WHERE sandbox_id=?");
    s.bind(sandbox_id);
    VESSEL_TRY(done(s, "revoke sessions of sandbox " + sandbox_id));
    return sqlite3_changes(db_);
  }
  Result<int> deleteExpiredSessions(int64_t now_ms) override {
    Stmt s(db_, "DELETE FROM sessions WHERE expires_ms<?");
    s.bind(now_ms);
    VESSEL_TRY(done(s, "delete expired sessions"));
    return sqlite3_changes(db_);
  }

  Status heartbeatNode(const NodeRecord& n) override {
    Stmt s(db_,
           "INSERT INTO nodes(name,advertise_url,data_url,memory_mib,memory_free_mib,vcpus,"
           "sandboxes,templates,accel,state,registered_ms,heartbeat_ms,envd_url) "
           "VALUES(?,?,?,?,?,?,?,?,?,'up',?,?,?) ON CONFLICT(name) DO UPDATE SET "
           "advertise_url=excluded.advertise_url, data_url=excluded.data_url,"
           "envd_url=excluded.envd_url,"
           "memory_mib=excluded.memory_mib, memory_free_mib=excluded.memory_free_mib,"
           "vcpus=excluded.vcpus, sandboxes=excluded.sandboxes, templates=excluded.templates,"
           "accel=excluded.accel, state='up', heartbeat_ms=excluded.heartbeat_ms");
    int64_t now = nowMs();
    s.bind(n.name).bind(n.advertise_url).bind(n.data_url);
    s.bind(static_cast<int64_t>(n.memory_mib)).bind(static_cast<int64_t>(n.memory_free_mib));
    s.bind(int64_t{n.vcpus}).bind(n.sandboxes).bind(n.templates_json).bind(n.accel);
    s.bind(now).bind(now).bind(n.envd_url);
    return done(s, "heartbeat of node " + n.name);
  }
  Result<std::vector<NodeRecord>> listNodes() override {
    Stmt s(db_,
           "SELECT name,advertise_url,data_url,memory_mib,memory_free_mib,vcpus,sandboxes,"
           "templates,accel,state,registered_ms,heartbeat_ms,envd_url FROM nodes ORDER BY name");
    std::vector<NodeRecord> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      NodeRecord n;
      n.name = s.text(0);
      n.advertise_url = s.text(1);
      n.data_url = s.text(2);
      n.memory_mib = static_cast<uint64_t>(s.integer(3));
      n.memory_free_mib = static_cast<uint64_t>(s.integer(4));
      n.vcpus = static_cast<unsigned>(s.integer(5));
      n.sandboxes = s.integer(6);
      n.templates_json = s.text(7);
      n.accel = s.text(8);
      n.lost = s.text(9) == "lost";
      n.registered_ms = s.integer(10);
      n.heartbeat_ms = s.integer(11);
      n.envd_url = s.text(12);
      out.push_back(std::move(n));
    }
    if (rc != SQLITE_DONE) return err("list nodes");
    return out;
  }
  Result<bool> markNodeLost(const std::string& name, int64_t before_ms) override {
    Stmt s(db_, "UPDATE nodes SET state='lost' WHERE name=? AND state='up' AND heartbeat_ms<?");
    s.bind(name).bind(before_ms);
    VESSEL_TRY(done(s, "mark node " + name + " lost"));
    return sqlite3_changes(db_) > 0;
  }
  Status setSandboxNode(const std::string& sandbox_id, const std::string& node) override {
    Stmt s(db_, "UPDATE sandboxes SET node=? WHERE id=?");
    s.bind(node).bind(sandbox_id);
    return done(s, "set node of sandbox " + sandbox_id);
  }
  Result<std::string> sandboxNode(const std::string& sandbox_id) override {
    Stmt s(db_, "SELECT node FROM sandboxes WHERE id=?");
    s.bind(sandbox_id);
    int rc = s.step();
    if (rc == SQLITE_ROW) return s.text(0);
    if (rc != SQLITE_DONE) return err("node of sandbox " + sandbox_id);
    return std::string();
  }
  Result<std::vector<SandboxRecord>> listNodeSandboxes(const std::string& node) override {
    std::string sql = std::string("SELECT ") + kSandboxCols +
                      " FROM sandboxes WHERE node=? AND state NOT IN ('deleted','failed')"
                      " ORDER BY id";
    Stmt s(db_, sql.c_str());
    s.bind(node);
    return collect(s, "list sandboxes of node " + node);
  }
  Status heartbeatReplica(const std::string& id) override {
    Stmt s(db_,
           "INSERT INTO replicas(id,heartbeat_ms) VALUES(?,?) ON CONFLICT(id) DO UPDATE SET "
           "heartbeat_ms=excluded.heartbeat_ms");
    s.bind(id).bind(nowMs());
    return done(s, "heartbeat of replica " + id);
  }
  Result<std::vector<std::string>> listStaleReplicas(int64_t before_ms) override {
    Stmt s(db_, "SELECT id FROM replicas WHERE heartbeat_ms<? ORDER BY id");
    s.bind(before_ms);
    std::vector<std::string> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) out.push_back(s.text(0));
    if (rc != SQLITE_DONE) return err("list stale replicas");
    return out;
  }
  Result<std::vector<std::string>> listLiveReplicas(int64_t since_ms) override {
    Stmt s(db_, "SELECT id FROM replicas WHERE heartbeat_ms>=? ORDER BY id");
    s.bind(since_ms);
    std::vector<std::string> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) out.push_back(s.text(0));
    if (rc != SQLITE_DONE) return err("list live replicas");
    return out;
  }
  Status deleteReplica(const std::string& id) override {
    Stmt s(db_, "DELETE FROM replicas WHERE id=?");
    s.bind(id);
    return done(s, "delete replica " + id);
  }
  Result<std::vector<OperationRecord>> claimOperations(const std::string& from,
                                                       const std::string& to) override {
    // One transaction under the write lock: no other writer between the
    // read and the update.
    VESSEL_TRY(exec("BEGIN IMMEDIATE;"));
    auto r = [&]() -> Result<std::vector<OperationRecord>> {
      std::string sql = std::string("SELECT ") + kOperationCols +
                        " FROM operations WHERE owner=? AND state IN ('pending','running')"
                        " ORDER BY created_ms";
      Stmt s(db_, sql.c_str());
      s.bind(from);
      std::vector<OperationRecord> out;
      int rc;
      while ((rc = s.step()) == SQLITE_ROW) out.push_back(readOperation(s));
      if (rc != SQLITE_DONE) return err("claim operations of " + from);
      Stmt u(db_, "UPDATE operations SET owner=? WHERE owner=? AND state IN ('pending','running')");
      u.bind(to).bind(from);
      VESSEL_TRY(done(u, "claim operations of " + from));
      VESSEL_TRY(exec("COMMIT;"));
      for (auto& o : out) o.owner = to;
      return out;
    }();
    if (!r.ok()) (void)exec("ROLLBACK;");
    return r;
  }

  // The template catalogue.
  static constexpr const char* kTemplateCols =
      "name,version,tenant_id,manifest,sizes,created_at,registered_ms,deleted_ms";
  static TemplateRecord readTemplate(Stmt& s) {
    TemplateRecord t;
    t.name = s.text(0);
    t.version = s.text(1);
    t.tenant_id = s.text(2);
    t.manifest_json = s.text(3);
    t.sizes_json = s.text(4);
    t.created_at = s.text(5);
    t.registered_ms = s.integer(6);
    t.deleted = s.integer(7) != 0;
    return t;
  }
  Status putTemplate(const TemplateRecord& t, bool revive) override {
    std::string sql = std::string("INSERT INTO templates(") + kTemplateCols +
                      ") VALUES(?,?,?,?,?,?,?,0) ON CONFLICT(name,version) DO " +
                      (revive ? "UPDATE SET tenant_id=excluded.tenant_id,"
                                "manifest=excluded.manifest, sizes=excluded.sizes,"
                                "created_at=excluded.created_at,"
                                "registered_ms=excluded.registered_ms, deleted_ms=0"
                              : "NOTHING");
    Stmt s(db_, sql.c_str());
    s.bind(t.name).bind(t.version).bind(t.tenant_id).bind(t.manifest_json).bind(t.sizes_json);
    s.bind(t.created_at).bind(nowMs());
    return done(s, "register template " + t.name + "@" + t.version);
  }
  Result<std::vector<TemplateRecord>> listTemplates(bool with_deleted) override {
    std::string sql = std::string("SELECT ") + kTemplateCols + " FROM templates" +
                      (with_deleted ? "" : " WHERE deleted_ms=0") +
                      " ORDER BY name, created_at, version";
    Stmt s(db_, sql.c_str());
    std::vector<TemplateRecord> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) out.push_back(readTemplate(s));
    if (rc != SQLITE_DONE) return err("list templates");
    return out;
  }
  Result<std::optional<TemplateRecord>> getTemplate(const std::string& name,
                                                    const std::string& version) override {
    std::string sql = std::string("SELECT ") + kTemplateCols +
                      " FROM templates WHERE name=? AND deleted_ms=0" +
                      (version.empty() ? "" : " AND version=?") +
                      " ORDER BY created_at DESC, version DESC LIMIT 1";
    Stmt s(db_, sql.c_str());
    s.bind(name);
    if (!version.empty()) s.bind(version);
    int rc = s.step();
    if (rc == SQLITE_ROW) return std::optional<TemplateRecord>(readTemplate(s));
    if (rc != SQLITE_DONE) return err("get template " + name);
    return std::optional<TemplateRecord>();
  }
  Status deleteTemplate(const std::string& name, const std::string& version) override {
    Stmt s(db_, "UPDATE templates SET deleted_ms=? WHERE name=? AND version=? AND deleted_ms=0");
    s.bind(nowMs()).bind(name).bind(version);
    VESSEL_TRY(done(s, "delete template " + name + "@" + version));
    if (sqlite3_changes(db_) == 0)
      return Error(Code::kNotFound, "template " + name + "@" + version + " does not exist");
    return okStatus();
  }

 private:
  Result<std::vector<SandboxRecord>> collect(Stmt& s, const std::string& what) {
    std::vector<SandboxRecord> out;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) out.push_back(readSandbox(s));
    if (rc != SQLITE_DONE) return err(what);
    return out;
  }
  Status done(Stmt& s, const std::string& what) {
    if (!s.ok()) return err("prepare " + what);
    int rc = s.step();
    if (rc == SQLITE_CONSTRAINT)
      return Error(Code::kAlreadyExists, "sqlite: " + what + ": " + sqlite3_errmsg(db_));
    if (rc != SQLITE_DONE) return err(what);
    return okStatus();
  }
  Error err(const std::string& what) const {
    return Error(Code::kUnavailable, "sqlite: " + what + ": " + sqlite3_errmsg(db_));
  }
  Status exec(const char* sql) {
    char* msg = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
      std::string m = msg ? msg : "?";
      sqlite3_free(msg);
      return Error(Code::kUnavailable, std::string("sqlite: ") + m);
    }
    return okStatus();
  }
  Result<int> userVersion() {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, "PRAGMA user_version", -1, &st, nullptr) != SQLITE_OK)
      return err("user_version");
    int v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    return v;
  }

  sqlite3* db_;
  const WallClock& clock_;
  int version_ = 0;
};

}  // namespace

int64_t nowMs() { return systemWallClock().nowMs(); }

Result<std::unique_ptr<Store>> openSqlite(const std::string& path, const WallClock* clock) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string m = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    return Error(Code::kUnavailable, "open database " + path + ": " + m);
  }
  auto s = std::make_unique<SqliteStore>(db, clock ? *clock : systemWallClock());
  if (auto r = s->init(); !r.ok()) return std::move(r).error().withContext("open database " + path);
  return std::unique_ptr<Store>(std::move(s));
}

}  // namespace vessel::store
