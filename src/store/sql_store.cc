// The Store, written once for SQLite and PostgreSQL: every statement below
// is SQL both engines accept, rendered for the driver's dialect
// (sql_dialect.h: placeholders and a few tokens), and run through the
// driver (sql_driver.h). Same timestamps on both (the injected WallClock,
// never the server's now()), same answers: the store test suite runs
// against both engines.
//
// Concurrency. Most calls are one statement, atomic on its own: on
// PostgreSQL in autocommit mode at READ COMMITTED, where an UPDATE
// re-checks its WHERE clause against the newest committed version of the
// row it waited for, so conditional updates (touchSandbox's {greatest},
// setOperationState's "not finished yet", claimOperations' owner) cannot
// lose a concurrent write. Three calls need more (transactions are BEGIN
// IMMEDIATE on SQLite: the database's write lock from the start):
//   - migrate(): a transaction with the dialect's migration lock
//     (PostgreSQL: an advisory lock), so replicas starting together
//     migrate once and wait for each other.
//   - appendEvent(): the dialect's sequence lock (PostgreSQL: an advisory
//     lock per tenant, in a transaction) around taking the sequence number
//     and inserting, so a tenant's event numbers become visible in commit
//     order; without it a reader following "after seq N" (SSE) could see
//     N+1 commit before N and skip N forever. SQLite's one writer at a
//     time commits them in order: one INSERT.
//   - insertSandboxAdmitted(): the tenant's row read {for_update}
//     (PostgreSQL: its row lock) across the quota check and the insert, so
//     two replicas cannot both admit the tenant's last sandbox.
// Other sequences of calls by the callers (a state check, then a
// transition) are not atomic across replicas yet; see docs/design.md,
// "The store".
#include "store/sql_store.h"

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <mutex>
#include <set>
#include <tuple>

#include "base/aead.h"
#include "store/migrations.h"
#include "store/sql.h"
#include "store/sql_credentials.h"
#include "store/sql_logs.h"
#include "store/sql_records.h"
#include "store/sql_volumes.h"

namespace vessel::store {

namespace {

constexpr std::string_view kGetMeta = "SELECT value FROM meta WHERE key=?";

class SqlStore final : public Store {
 public:
  SqlStore(std::unique_ptr<SqlDriver> d, const WallClock& clock)
      : d_(std::move(d)), clock_(clock) {}

  std::string_view engine() const override {
    return d_->dialect() == Dialect::kPostgres ? "postgres" : "sqlite";
  }
  int schemaVersion() const override { return version_; }
  Status migrate();

  Result<std::optional<std::string>> getMeta(const std::string& key) override {
    return one("get meta " + key, text0, kGetMeta, key);
  }
  Status setMeta(const std::string& key, const std::string& value) override {
    return run("set meta " + key,
               "INSERT INTO meta(key,value) VALUES(?,?) "
               "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
               key, value);
  }
  Result<std::string> getOrSetMeta(const std::string& key, const std::string& value) override {
    return call("get or set meta " + key, [&](Sql& q) -> Result<std::string> {
      VESSEL_TRY(q.exec("INSERT INTO meta(key,value) VALUES(?,?) ON CONFLICT(key) DO NOTHING", key,
                        value));
      VESSEL_ASSIGN_OR_RETURN(auto v, q.one(text0, kGetMeta, key));
      if (!v) return Error(Code::kInternal, "meta " + key + " vanished");
      return *v;
    });
  }

  Status createTenant(const std::string& id, const std::string& name) override {
    return run("create tenant " + id, "INSERT INTO tenants(id,name,created_ms) VALUES(?,?,?)", id,
               name, nowMs());
  }
  Result<int64_t> countTenants() override {
    return call("count tenants", [&](Sql& q) -> Result<int64_t> {
      VESSEL_ASSIGN_OR_RETURN(auto n, q.one(int0, "SELECT count(*) FROM tenants"));
      return n.value_or(0);
    });
  }
  Status addApiKey(const std::string& tenant_id, const std::string& key_sha256) override {
    return run("add api key for tenant " + tenant_id,
               "INSERT INTO api_keys(key_sha256,tenant_id,created_ms) VALUES(?,?,?)", key_sha256,
               tenant_id, nowMs());
  }
  Result<std::optional<std::string>> tenantForKey(const std::string& key_sha256) override {
    return one("look up api key", text0, "SELECT tenant_id FROM api_keys WHERE key_sha256=?",
               key_sha256);
  }

  Status insertSandbox(const SandboxRecord& r) override {
    return call("insert sandbox " + r.id,
                [&](Sql& q) { return q.transaction([&] { return store::insertSandbox(q, r); }); });
  }
  Status insertSandboxAdmitted(const SandboxRecord& r, const Admission& admit) override {
    return call("insert sandbox " + r.id, [&](Sql& q) {
      return q.transaction([&]() -> Status {
        // The tenant's row {for_update} first: the admissions of one tenant
        // are serialized, and the usage read after the lock (on PostgreSQL
        // a fresh snapshot per statement) sees every one committed before.
        VESSEL_ASSIGN_OR_RETURN(auto limits, q.one(readLimits,
                                                   "SELECT " + std::string(kLimitCols) +
                                                       " FROM tenants WHERE id=?{for_update}",
                                                   r.tenant_id));
        if (!limits) return Error(Code::kNotFound, "tenant " + r.tenant_id + " does not exist");
        VESSEL_ASSIGN_OR_RETURN(auto use, q.one(readUsage, kUsageSql, r.tenant_id));
        if (auto refused = admit(*limits, use.value_or(TenantUsage{}))) return *refused;
        return store::insertSandbox(q, r);
      });
    });
  }
  Status setSandboxState(const std::string& id, SandboxState state,
                         const std::string& error) override {
    return run("update sandbox " + id,
               "UPDATE sandboxes SET state=?, error=?, updated_ms=? WHERE id=?", stateName(state),
               error, nowMs(), id);
  }
  Result<std::optional<SandboxRecord>> getSandbox(const std::string& tenant_id,
                                                  const std::string& id) override {
    return one("get sandbox " + id, readSandbox, sandboxesWhere("WHERE tenant_id=? AND id=?"),
               tenant_id, id);
  }
  Result<std::optional<SandboxRecord>> findSandbox(const std::string& id) override {
    return one("find sandbox " + id, readSandbox, sandboxesWhere("WHERE id=?"), id);
  }
  Result<std::vector<SandboxRecord>> listSandboxes(const std::string& tenant_id,
                                                   const std::string& after_id,
                                                   int limit) override {
    return all(
        "list sandboxes", readSandbox,
        sandboxesWhere("WHERE tenant_id=? AND id>? AND state!='deleted' ORDER BY id LIMIT ?"),
        tenant_id, after_id, limit);
  }

  Status insertOperation(const OperationRecord& o) override {
    return call("insert operation " + o.id, [&](Sql& q) { return store::insertOperation(q, o); });
  }
  Status setOperationState(const std::string& id, OpState state, const std::string& error_code,
                           const std::string& error_message) override {
    // One conditional UPDATE: of two writers finishing the same operation
    // (a replica ran it, another gave it up for lost) the first wins.
    return changeOne("update operation " + id,
                     Error(Code::kFailedPrecondition,
                           "operation " + id + " has finished already or does not exist"),
                     "UPDATE operations SET state=?, error_code=?, error_message=?, updated_ms=? "
                     "WHERE id=? AND state NOT IN ('done','failed')",
                     opStateName(state), error_code, error_message, nowMs(), id);
  }
  Result<std::optional<OperationRecord>> getOperation(const std::string& tenant_id,
                                                      const std::string& id) override {
    return one("get operation " + id, readOperation, operationsWhere("WHERE tenant_id=? AND id=?"),
               tenant_id, id);
  }

  Result<int64_t> appendEvent(const EventRecord& e) override {
    return call("append event", [&](Sql& q) -> Result<int64_t> {
      auto insert = [&]() -> Result<int64_t> {
        VESSEL_ASSIGN_OR_RETURN(
            auto seq, q.one(int0,
                            "INSERT INTO events(tenant_id,operation_id,sandbox_id,type,data,at_ms)"
                            " VALUES(?,?,?,?,?,?) RETURNING seq",
                            e.tenant_id, e.operation_id, e.sandbox_id, e.type, e.data_json,
                            e.at_ms ? e.at_ms : nowMs()));
        if (!seq) return Error(Code::kInternal, "no sequence number");
        return *seq;
      };
      // The dialect's sequence lock, if it has one, is taken before the
      // number and held to commit (see the top); without one the insert
      // is atomic on its own.
      const auto& lock = hooks(q.dialect()).sequence_lock;
      if (lock.empty()) return insert();
      return q.transaction([&]() -> Result<int64_t> {
        VESSEL_TRY(q.exec(lock, kEventLockClass, e.tenant_id));
        return insert();
      });
    });
  }
  Result<std::vector<EventRecord>> listEvents(const std::string& tenant_id,
                                              const std::string& operation_id, int64_t after_seq,
                                              int limit) override {
    return all("list events", readEvent,
               "SELECT seq,tenant_id,operation_id,sandbox_id,type,data,at_ms FROM events "
               "WHERE tenant_id=? AND (CAST(? AS TEXT)='' OR operation_id=?) AND seq>? "
               "ORDER BY seq LIMIT ?",
               tenant_id, operation_id, operation_id, after_seq, limit);
  }

  Status setTenantLimits(const std::string& tenant_id, const TenantLimits& l) override {
    return changeOne("set limits of tenant " + tenant_id,
                     Error(Code::kNotFound, "tenant " + tenant_id + " does not exist"),
                     "UPDATE tenants SET max_sandboxes=?, max_memory_mib=?, max_vcpus=?,"
                     " max_disk_mib=? WHERE id=?",
                     l.max_sandboxes, l.max_memory_mib, l.max_vcpus, l.max_disk_mib, tenant_id);
  }
  Result<TenantLimits> tenantLimits(const std::string& tenant_id) override {
    return call("get limits of tenant " + tenant_id, [&](Sql& q) -> Result<TenantLimits> {
      VESSEL_ASSIGN_OR_RETURN(
          auto l,
          q.one(readLimits, "SELECT " + std::string(kLimitCols) + " FROM tenants WHERE id=?",
                tenant_id));
      if (!l) return Error(Code::kNotFound, "tenant " + tenant_id + " does not exist");
      return *l;
    });
  }
  Result<TenantUsage> tenantUsage(const std::string& tenant_id) override {
    return call("usage of tenant " + tenant_id, [&](Sql& q) -> Result<TenantUsage> {
      VESSEL_ASSIGN_OR_RETURN(auto u, q.one(readUsage, kUsageSql, tenant_id));
      return u.value_or(TenantUsage{});
    });
  }

  Status setSandboxLifetime(const std::string& id, int64_t idle_timeout_s,
                            int64_t expires_ms) override {
    return run("set lifetime of sandbox " + id,
               "UPDATE sandboxes SET idle_timeout_s=?, expires_ms=?, updated_ms=? WHERE id=?",
               idle_timeout_s, expires_ms, nowMs(), id);
  }
  Status touchSandbox(const std::string& id, int64_t at_ms) override {
    return run("touch sandbox " + id,
               "UPDATE sandboxes SET last_active_ms={greatest}(last_active_ms,?) WHERE id=?", at_ms,
               id);
  }
  Result<std::vector<SandboxRecord>> listExpired(int64_t now_ms, int limit) override {
    return all("list expired sandboxes", readSandbox,
               sandboxesWhere("WHERE state!='deleted' AND ((expires_ms>0 AND expires_ms<=?) OR"
                              " (state='running' AND idle_timeout_s>0"
                              " AND last_active_ms+idle_timeout_s*1000<=?)) ORDER BY id LIMIT ?"),
               now_ms, now_ms, limit);
  }
  Result<std::vector<SandboxRecord>> listLiveSandboxes() override {
    return all("list live sandboxes", readSandbox,
               sandboxesWhere("WHERE state NOT IN ('deleted','failed') ORDER BY id"));
  }
  Result<std::vector<OperationRecord>> listUnfinishedOperations() override {
    return all("list unfinished operations", readOperation,
               operationsWhere("WHERE state IN ('pending','running') ORDER BY created_ms, id"));
  }
  Result<std::vector<std::pair<SandboxState, int64_t>>> countSandboxesByState() override {
    return call(
        "count sandboxes", [&](Sql& q) -> Result<std::vector<std::pair<SandboxState, int64_t>>> {
          auto read = [](const SqlRow& r) {
            return std::pair(parseState(r.text(0)), r.integer(1));
          };
          VESSEL_ASSIGN_OR_RETURN(
              auto rows,
              q.all(read, "SELECT state, count(*) FROM sandboxes GROUP BY state ORDER BY state"));
          std::vector<std::pair<SandboxState, int64_t>> out;
          for (const auto& [state, n] : rows)
            if (state) out.emplace_back(*state, n);
          return out;
        });
  }

  Status insertSession(const SessionRecord& s) override {
    return run("insert session for sandbox " + s.sandbox_id,
               "INSERT INTO sessions(token_sha256,tenant_id,sandbox_id,created_ms,expires_ms) "
               "VALUES(?,?,?,?,?)",
               s.token_sha256, s.tenant_id, s.sandbox_id, s.created_ms, s.expires_ms);
  }
  Result<std::optional<SessionRecord>> sessionForToken(const std::string& token_sha256) override {
    return one("look up session", readSession,
               "SELECT token_sha256,tenant_id,sandbox_id,created_ms,expires_ms FROM sessions "
               "WHERE token_sha256=?",
               token_sha256);
  }
  Result<int> revokeSessions(const std::string& sandbox_id) override {
    return changes("revoke sessions of sandbox " + sandbox_id,
                   "DELETE FROM sessions WHERE sandbox_id=?", sandbox_id);
  }
  Result<int> deleteExpiredSessions(int64_t now_ms) override {
    return changes("delete expired sessions", "DELETE FROM sessions WHERE expires_ms<?", now_ms);
  }

  // Credentials (sql_credentials.cc): sealed at rest under the key.
  Result<int> useCredentialKey(std::string key) override {
    if (key.size() != kAeadKeyBytes)
      return Error(Code::kInvalidArgument,
                   "a credential key is " + std::to_string(kAeadKeyBytes) + " bytes");
    credential_key_ = std::move(key);
    return call("seal stored credentials",
                [&](Sql& q) { return store::sealPlainCredentials(q, credential_key_); });
  }
  Status putCredential(const CredentialRecord& c) override {
    return call("put credential " + c.name,
                [&](Sql& q) { return store::putCredential(q, credential_key_, c); });
  }
  Result<std::vector<CredentialRecord>> listCredentials(const std::string& tenant_id) override {
    return call("list credentials",
                [&](Sql& q) { return store::listCredentials(q, credential_key_, tenant_id); });
  }
  Result<std::optional<CredentialRecord>> getCredential(const std::string& tenant_id,
                                                        const std::string& name) override {
    return call("get credential " + name,
                [&](Sql& q) { return store::getCredential(q, credential_key_, tenant_id, name); });
  }
  Status setSandboxCredentials(const std::string& sandbox_id,
                               const std::map<std::string, std::string>& sealed) override {
    return call("set credentials of " + sandbox_id,
                [&](Sql& q) { return store::setSandboxCredentials(q, sandbox_id, sealed); });
  }
  Result<std::optional<std::string>> sandboxCredential(const std::string& sandbox_id,
                                                       const std::string& name) override {
    return call("get credential " + name + " of " + sandbox_id,
                [&](Sql& q) { return store::sandboxCredential(q, sandbox_id, name); });
  }
  Status deleteCredential(const std::string& tenant_id, const std::string& name) override {
    return run("delete credential " + name, "DELETE FROM credentials WHERE tenant_id=? AND name=?",
               tenant_id, name);
  }
  // A sandbox's network settings (its ingress settings go with its record).
  Status setSandboxNetwork(const std::string& sandbox_id, const NetworkSettings& n) override {
    return run("set network of " + sandbox_id,
               "INSERT INTO sandbox_network(sandbox_id,settings) VALUES(?,?) "
               "ON CONFLICT(sandbox_id) DO UPDATE SET settings=excluded.settings",
               sandbox_id, boost::json::serialize(encodeNetwork(n)));
  }
  Result<std::optional<NetworkSettings>> getSandboxNetwork(const std::string& sandbox_id) override {
    VESSEL_ASSIGN_OR_RETURN(
        auto text, one("get network of " + sandbox_id, text0,
                       "SELECT settings FROM sandbox_network WHERE sandbox_id=?", sandbox_id));
    return readNetwork(text, sandbox_id);
  }

  // Many machines.
  Status heartbeatNode(const NodeRecord& n) override {
    const int64_t now = nowMs();
    return run("heartbeat of node " + n.name,
               "INSERT INTO nodes(" + std::string(kNodeCols) +
                   ") VALUES(?,?,?,?,?,?,?,?,?,'up',?,?,?,?) ON CONFLICT(name) DO UPDATE SET"
                   " advertise_url=excluded.advertise_url, data_url=excluded.data_url,"
                   " envd_url=excluded.envd_url, volume_free_mib=excluded.volume_free_mib,"
                   " memory_mib=excluded.memory_mib, memory_free_mib=excluded.memory_free_mib,"
                   " vcpus=excluded.vcpus, sandboxes=excluded.sandboxes,"
                   " templates=excluded.templates, accel=excluded.accel, state='up',"
                   " heartbeat_ms=excluded.heartbeat_ms",
               n.name, n.advertise_url, n.data_url, n.memory_mib, n.memory_free_mib, n.vcpus,
               n.sandboxes, stringListJson(n.templates), n.accel, now, now, n.envd_url,
               static_cast<int64_t>(n.volume_free_mib));
  }
  Result<std::vector<NodeRecord>> listNodes() override {
    return all("list nodes", readNode,
               "SELECT " + std::string(kNodeCols) + " FROM nodes ORDER BY name");
  }
  Result<bool> markNodeLost(const std::string& name, int64_t before_ms) override {
    // One conditional UPDATE: of replicas noticing together, one changes the row.
    return call("mark node " + name + " lost", [&](Sql& q) -> Result<bool> {
      VESSEL_ASSIGN_OR_RETURN(
          int64_t n,
          q.exec("UPDATE nodes SET state='lost' WHERE name=? AND state='up' AND heartbeat_ms<?",
                 name, before_ms));
      return n > 0;
    });
  }
  Status setSandboxNode(const std::string& sandbox_id, const std::string& node) override {
    return run("set node of sandbox " + sandbox_id, "UPDATE sandboxes SET node=? WHERE id=?", node,
               sandbox_id);
  }
  Result<std::string> sandboxNode(const std::string& sandbox_id) override {
    return call("node of sandbox " + sandbox_id, [&](Sql& q) -> Result<std::string> {
      VESSEL_ASSIGN_OR_RETURN(auto n,
                              q.one(text0, "SELECT node FROM sandboxes WHERE id=?", sandbox_id));
      return n.value_or("");
    });
  }
  Result<std::vector<SandboxRecord>> listNodeSandboxes(const std::string& node) override {
    return all("list sandboxes of node " + node, readSandbox,
               sandboxesWhere("WHERE node=? AND state NOT IN ('deleted','failed') ORDER BY id"),
               node);
  }
  Status heartbeatReplica(const std::string& id) override {
    return run("heartbeat of replica " + id,
               "INSERT INTO replicas(id,heartbeat_ms) VALUES(?,?) ON CONFLICT(id) DO UPDATE SET "
               "heartbeat_ms=excluded.heartbeat_ms",
               id, nowMs());
  }
  Result<std::vector<std::string>> listStaleReplicas(int64_t before_ms) override {
    return all("list stale replicas", text0,
               "SELECT id FROM replicas WHERE heartbeat_ms<? ORDER BY id", before_ms);
  }
  Result<std::vector<std::string>> listLiveReplicas(int64_t since_ms) override {
    return all("list live replicas", text0,
               "SELECT id FROM replicas WHERE heartbeat_ms>=? ORDER BY id", since_ms);
  }
  Status deleteReplica(const std::string& id) override {
    return run("delete replica " + id, "DELETE FROM replicas WHERE id=?", id);
  }
  Result<std::vector<OperationRecord>> claimOperations(const std::string& from,
                                                       const std::string& to) override {
    // One UPDATE: a row another replica claimed first no longer matches
    // `owner=from` when this one re-checks it after waiting for its lock.
    auto r = all("claim operations of " + from, readOperation,
                 "UPDATE operations SET owner=? WHERE owner=? AND state IN ('pending','running')"
                 " RETURNING " +
                     std::string(kOperationCols),
                 to, from);
    if (r.ok())
      std::sort(r->begin(), r->end(), [](const auto& a, const auto& b) {
        return std::tie(a.created_ms, a.id) < std::tie(b.created_ms, b.id);
      });
    return r;
  }

  // Sandbox logs (sql_logs.cc).
  Result<int64_t> appendLog(const LogRecord& r) override {
    return call("append log of " + r.sandbox_id,
                [&](Sql& q) { return store::appendLog(q, r, nowMs()); });
  }
  Result<std::vector<LogRecord>> listLogs(const std::string& tenant_id,
                                          const std::string& sandbox_id,
                                          const LogQuery& lq) override {
    return call("list log of " + sandbox_id,
                [&](Sql& q) { return store::listLogs(q, tenant_id, sandbox_id, lq); });
  }
  Result<int> trimLogs(const std::string& sandbox_id, int keep) override {
    return call("trim log of " + sandbox_id,
                [&](Sql& q) { return store::trimLogs(q, sandbox_id, keep); });
  }
  Result<int> collectLogs(int64_t ended_before_ms) override {
    return call("collect logs", [&](Sql& q) { return store::collectLogs(q, ended_before_ms); });
  }

  // The template catalogue.
  Status putTemplate(const TemplateRecord& t, bool revive) override {
    return run("register template " + t.name + "@" + t.version,
               "INSERT INTO templates(" + std::string(kTemplateCols) +
                   ") VALUES(?,?,?,?,?,?,?,0) ON CONFLICT(name,version) DO " +
                   (revive ? "UPDATE SET tenant_id=excluded.tenant_id,"
                             " manifest=excluded.manifest, sizes=excluded.sizes,"
                             " created_at=excluded.created_at,"
                             " registered_ms=excluded.registered_ms, deleted_ms=0"
                           : "NOTHING"),
               t.name, t.version, t.tenant_id, t.manifest_json, t.sizes_json, t.created_at,
               nowMs());
  }
  Result<std::vector<TemplateRecord>> listTemplates(bool with_deleted) override {
    return all("list templates", readTemplate,
               "SELECT " + std::string(kTemplateCols) + " FROM templates" +
                   (with_deleted ? "" : " WHERE deleted_ms=0") +
                   " ORDER BY name, created_at, version");
  }
  Result<std::optional<TemplateRecord>> getTemplate(const std::string& name,
                                                    const std::string& version) override {
    // An empty version matches every version: the newest is taken.
    return one("get template " + name, readTemplate,
               "SELECT " + std::string(kTemplateCols) +
                   " FROM templates WHERE name=? AND deleted_ms=0"
                   " AND (CAST(? AS TEXT)='' OR version=?)"
                   " ORDER BY created_at DESC, version DESC LIMIT 1",
               name, version, version);
  }
  Status deleteTemplate(const std::string& name, const std::string& version) override {
    return changeOne(
        "delete template " + name + "@" + version,
        Error(Code::kNotFound, "template " + name + "@" + version + " does not exist"),
        "UPDATE templates SET deleted_ms=? WHERE name=? AND version=? AND deleted_ms=0", nowMs(),
        name, version);
  }

  // Volumes (sql_volumes.cc).
  Status insertVolume(const VolumeRecord& v, int64_t max_total_mib) override {
    return call("insert volume " + v.name,
                [&](Sql& q) { return store::insertVolume(q, v, max_total_mib); });
  }
  Result<std::optional<VolumeRecord>> getVolume(const std::string& tenant_id,
                                                const std::string& name) override {
    return call("get volume " + name, [&](Sql& q) { return store::getVolume(q, tenant_id, name); });
  }
  Result<std::vector<VolumeRecord>> listVolumes(const std::string& tenant_id) override {
    return call("list volumes", [&](Sql& q) { return store::listVolumes(q, tenant_id); });
  }
  Result<std::vector<VolumeRecord>> listNodeVolumes(const std::string& node) override {
    return call("list volumes of node '" + node + "'",
                [&](Sql& q) { return store::listNodeVolumes(q, node); });
  }
  Result<VolumeRecord> deleteVolume(const std::string& tenant_id, const std::string& name,
                                    bool force) override {
    return call("delete volume " + name,
                [&](Sql& q) { return store::deleteVolume(q, tenant_id, name, force); });
  }
  Status insertVolumeMount(const VolumeMountRecord& m) override {
    return call("insert mount of volume " + m.volume_id,
                [&](Sql& q) { return store::insertVolumeMount(q, m); });
  }
  Result<std::vector<VolumeMountRecord>> listVolumeMounts(const std::string& volume_id) override {
    return call("list mounts of volume " + volume_id,
                [&](Sql& q) { return store::listVolumeMounts(q, volume_id); });
  }
  Status setTemplateVolumes(const std::string& tenant_id, const std::string& template_name,
                            const std::vector<TemplateVolumeRecord>& v) override {
    return call("set the volumes of template " + template_name,
                [&](Sql& q) { return store::setTemplateVolumes(q, tenant_id, template_name, v); });
  }
  Result<std::vector<TemplateVolumeRecord>> listTemplateVolumes(
      const std::string& tenant_id, const std::string& template_name) override {
    return call("list the volumes of template " + template_name,
                [&](Sql& q) { return store::listTemplateVolumes(q, tenant_id, template_name); });
  }
  Result<std::vector<VolumeMountRecord>> listSandboxVolumeMounts(
      const std::string& sandbox_id) override {
    return call("list volume mounts of " + sandbox_id,
                [&](Sql& q) { return store::listSandboxVolumeMounts(q, sandbox_id); });
  }
  Result<int> deleteSandboxVolumeMounts(const std::string& sandbox_id) override {
    return call("delete volume mounts of " + sandbox_id,
                [&](Sql& q) { return store::deleteSandboxVolumeMounts(q, sandbox_id); });
  }

 private:
  int64_t nowMs() const { return clock_.nowMs(); }

  // Every call: one at a time on the one connection (made again first if
  // it broke), errors naming `what`.
  template <typename F>
  auto call(std::string_view what, F&& body) -> std::invoke_result_t<F, Sql&> {
    std::lock_guard lock(mu_);
    Sql q(*d_, what);
    if (auto c = d_->connect(); !c.ok()) return q.fail(std::move(c).error());
    return body(q);
  }
  // The calls that are one statement.
  template <typename... A>
  Status run(std::string_view what, std::string_view sql, const A&... args) {
    return call(what, [&](Sql& q) -> Status {
      VESSEL_TRY(q.exec(sql, args...));
      return okStatus();
    });
  }
  template <typename... A>
  Result<int> changes(std::string_view what, std::string_view sql, const A&... args) {
    return call(what, [&](Sql& q) -> Result<int> {
      VESSEL_ASSIGN_OR_RETURN(int64_t n, q.exec(sql, args...));
      return static_cast<int>(n);
    });
  }
  // A statement that must change a row, else `none`.
  template <typename... A>
  Status changeOne(std::string_view what, Error none, std::string_view sql, const A&... args) {
    VESSEL_ASSIGN_OR_RETURN(int n, changes(what, sql, args...));
    if (n == 0) return none;
    return okStatus();
  }
  template <typename Read, typename... A>
  auto one(std::string_view what, Read read, std::string_view sql, const A&... args)
      -> Result<std::optional<std::invoke_result_t<Read, const SqlRow&>>> {
    return call(what, [&](Sql& q) { return q.one(read, sql, args...); });
  }
  template <typename Read, typename... A>
  auto all(std::string_view what, Read read, std::string_view sql, const A&... args)
      -> Result<std::vector<std::invoke_result_t<Read, const SqlRow&>>> {
    return call(what, [&](Sql& q) { return q.all(read, sql, args...); });
  }

  const std::unique_ptr<SqlDriver> d_;
  const WallClock& clock_;
  // Drivers are not thread-safe (a libpqxx connection; SQLite's
  // transactions are per connection): calls come from the io thread, but
  // nothing here should depend on that.
  std::mutex mu_;  // guards d_'s connection
  int version_ = 0;
  std::string credential_key_;  // "" on a node: credentials unreadable
};

// Applies the migrations this database lacks (migrations.h, migrateSchema).
Status SqlStore::migrate() {
  return call("migrate", [&](Sql& q) -> Status {
    VESSEL_ASSIGN_OR_RETURN(version_, migrateSchema(q, nowMs()));
    return okStatus();
  });
}

}  // namespace

int64_t nowMs() { return systemWallClock().nowMs(); }

Result<std::unique_ptr<Store>> openSqlStore(std::unique_ptr<SqlDriver> driver,
                                            const WallClock& clock) {
  auto s = std::make_unique<SqlStore>(std::move(driver), clock);
  VESSEL_TRY(s->migrate());
  return std::unique_ptr<Store>(std::move(s));
}

}  // namespace vessel::store
