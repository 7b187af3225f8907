#include "store/migrations.h"

#include "store/sql_records.h"

namespace vessel::store {

namespace {

// Numbered migrations, applied in number order, each once; which ones a
// database has is recorded in schema_migrations. Numbers are handed out to
// work in progress ahead of time and may land out of order, so a gap is
// normal and a later-landing lower number is still applied. Never edit one
// that has shipped; add a new number.
//
// Dialect tokens (the only differences between the engines, rendered by
// sql_dialect.cc): {i64}, a 64-bit integer, and {seq}, an increasing key
// the database assigns. Everything else is SQL both accept with the same
// meaning.
struct Template {
  int number;
  const char* sql;
  // PostgreSQL only (row-level security): SQLite records the number and
  // runs nothing, so both engines count the same migrations.
  bool postgres_only = false;
};
constexpr Template kTemplates[] = {
    {1, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"},
    // The public API's objects.
    {2,
     "CREATE TABLE tenants (id TEXT PRIMARY KEY, name TEXT NOT NULL, created_ms {i64} NOT NULL);"
     "CREATE TABLE api_keys (key_sha256 TEXT PRIMARY KEY,"
     "  tenant_id TEXT NOT NULL REFERENCES tenants(id), created_ms {i64} NOT NULL);"
     "CREATE TABLE sandboxes (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id),"
     "  template TEXT NOT NULL, state TEXT NOT NULL, error TEXT NOT NULL DEFAULT '',"
     "  vcpus {i64} NOT NULL, memory_mib {i64} NOT NULL, metadata TEXT NOT NULL,"
     "  created_ms {i64} NOT NULL, updated_ms {i64} NOT NULL);"
     "CREATE INDEX sandboxes_tenant ON sandboxes(tenant_id, id);"
     "CREATE TABLE operations (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id),"
     "  sandbox_id TEXT NOT NULL, kind TEXT NOT NULL, state TEXT NOT NULL,"
     "  error_code TEXT NOT NULL DEFAULT '', error_message TEXT NOT NULL DEFAULT '',"
     "  created_ms {i64} NOT NULL, updated_ms {i64} NOT NULL);"
     "CREATE TABLE events (seq {seq}, tenant_id TEXT NOT NULL,"
     "  operation_id TEXT NOT NULL, sandbox_id TEXT NOT NULL, type TEXT NOT NULL,"
     "  data TEXT NOT NULL, at_ms {i64} NOT NULL);"
     "CREATE INDEX events_tenant ON events(tenant_id, seq);"
     "CREATE INDEX events_operation ON events(operation_id, seq);"},
    // Data-plane sessions (token hashes bound to a sandbox and tenant).
    {3,
     "CREATE TABLE sessions (token_sha256 TEXT PRIMARY KEY,"
     "  tenant_id TEXT NOT NULL REFERENCES tenants(id),"
     "  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),"
     "  created_ms {i64} NOT NULL, expires_ms {i64} NOT NULL);"
     "CREATE INDEX sessions_sandbox ON sessions(sandbox_id);"
     "CREATE INDEX sessions_expiry ON sessions(expires_ms);"},
    // Lifetimes and quotas (NULL limits: the deployment's defaults).
    {4,
     "ALTER TABLE tenants ADD COLUMN max_sandboxes {i64};"
     "ALTER TABLE tenants ADD COLUMN max_memory_mib {i64};"
     "ALTER TABLE sandboxes ADD COLUMN idle_timeout_s {i64} NOT NULL DEFAULT 0;"
     "ALTER TABLE sandboxes ADD COLUMN expires_ms {i64} NOT NULL DEFAULT 0;"
     "ALTER TABLE sandboxes ADD COLUMN last_active_ms {i64} NOT NULL DEFAULT 0;"
     "CREATE INDEX sandboxes_state ON sandboxes(state);"},
    // Egress: credentials (secrets, per tenant) and each sandbox's network settings.
    {5,
     "CREATE TABLE credentials (tenant_id TEXT NOT NULL REFERENCES tenants(id),"
     "  name TEXT NOT NULL, hosts TEXT NOT NULL, header TEXT NOT NULL, value TEXT NOT NULL,"
     "  created_ms {i64} NOT NULL, PRIMARY KEY (tenant_id, name));"
     "CREATE TABLE sandbox_network (sandbox_id TEXT PRIMARY KEY, settings TEXT NOT NULL);"},
    // Disk sizes, and quotas on disk and vCPUs (NULL: the deployment's defaults).
    {6,
     "ALTER TABLE sandboxes ADD COLUMN disk_mib {i64} NOT NULL DEFAULT 0;"
     "ALTER TABLE tenants ADD COLUMN max_vcpus {i64};"
     "ALTER TABLE tenants ADD COLUMN max_disk_mib {i64};"},
    // Many machines (vesseld --role=api|node): the node registry with each
    // node's last heartbeat and capacity, the node each sandbox runs on, and
    // which API replica runs each operation (replicas heartbeat too, so
    // another takes over the operations of one that died).
    {7,
     "CREATE TABLE nodes (name TEXT PRIMARY KEY, advertise_url TEXT NOT NULL,"
     "  data_url TEXT NOT NULL, memory_mib {i64} NOT NULL, memory_free_mib {i64} NOT NULL,"
     "  vcpus {i64} NOT NULL, sandboxes {i64} NOT NULL, templates TEXT NOT NULL,"
     "  accel TEXT NOT NULL, state TEXT NOT NULL, registered_ms {i64} NOT NULL,"
     "  heartbeat_ms {i64} NOT NULL);"
     "ALTER TABLE sandboxes ADD COLUMN node TEXT NOT NULL DEFAULT '';"
     "CREATE INDEX sandboxes_node ON sandboxes(node, state);"
     "ALTER TABLE operations ADD COLUMN owner TEXT NOT NULL DEFAULT '';"
     "CREATE TABLE replicas (id TEXT PRIMARY KEY, heartbeat_ms {i64} NOT NULL);"},
    // What a sandbox's timeout does (E2B's lifecycle): 'delete' or 'pause'
    // (keeping its memory unless pause_memory is 0), whether traffic may
    // resume it (auto_resume), and the lifetime it was created with (a
    // resume by traffic starts that lifetime again).
    {8,
     "ALTER TABLE sandboxes ADD COLUMN on_timeout TEXT NOT NULL DEFAULT 'delete';"
     "ALTER TABLE sandboxes ADD COLUMN pause_memory {i64} NOT NULL DEFAULT 1;"
     "ALTER TABLE sandboxes ADD COLUMN auto_resume {i64} NOT NULL DEFAULT 0;"
     "ALTER TABLE sandboxes ADD COLUMN lifetime_s {i64} NOT NULL DEFAULT 0;"},
    // The template catalogue: every template version some node has, with
    // its manifest (checksums) and file sizes, so API replicas need no
    // template files and a node can fetch one and check what it got.
    // Deleted versions stay as tombstones (deleted_ms) so that a node
    // coming back with the files does not bring them back.
    {9,
     "CREATE TABLE templates (name TEXT NOT NULL, version TEXT NOT NULL,"
     "  tenant_id TEXT NOT NULL, manifest TEXT NOT NULL, sizes TEXT NOT NULL,"
     "  created_at TEXT NOT NULL, registered_ms {i64} NOT NULL,"
     "  deleted_ms {i64} NOT NULL DEFAULT 0, PRIMARY KEY (name, version));"},
    // Each node's E2B envd listener, where API replicas forward the envd
    // traffic of the sandboxes it runs ("" for a node that serves none).
    {10, "ALTER TABLE nodes ADD COLUMN envd_url TEXT NOT NULL DEFAULT '';"},
    // Sandbox ports: each sandbox's ingress settings (E2B's allowPublicTraffic
    // and maskRequestHost), kept across pause, resume and restarts.
    {11, "CREATE TABLE sandbox_ingress (sandbox_id TEXT PRIMARY KEY, settings TEXT NOT NULL);"},
    // Sandbox logs (docs/logs.md): what happened to each sandbox and what
    // was run in it, a small JSON object per entry, bounded per sandbox
    // (the oldest go) and kept for a while after it ends. No tenant
    // column: a sandbox id names one tenant's sandbox, and reads join
    // sandboxes for the tenant.
    {12,
     "CREATE TABLE sandbox_logs (seq {seq}, sandbox_id TEXT NOT NULL, kind TEXT NOT NULL,"
     "  data TEXT NOT NULL, at_ms {i64} NOT NULL);"
     "CREATE INDEX sandbox_logs_sandbox ON sandbox_logs(sandbox_id, seq);"},
    // A taken-over node is contained (issue 24, item 5; store/node_roles.h):
    // row-level security for the nodes' own roles. The API replicas connect
    // as the tables' owner, which these policies do not bind; a node's role
    // (named as the node, `vessel node add`) sees and writes its own node
    // row, the sandboxes placed on it and what hangs off them, reads the
    // credentials only of tenants with a live sandbox on it, and writes no
    // meta but its own token hash. Subqueries on sandboxes are themselves
    // filtered for the node, so "IN (SELECT id FROM sandboxes)" is its own.
    {13,
     "ALTER TABLE nodes ENABLE ROW LEVEL SECURITY;"
     "CREATE POLICY nodes_read ON nodes FOR SELECT USING (true);"
     "CREATE POLICY nodes_own_insert ON nodes FOR INSERT WITH CHECK (name = current_user);"
     "CREATE POLICY nodes_own_update ON nodes FOR UPDATE USING (name = current_user)"
     "  WITH CHECK (name = current_user);"
     "ALTER TABLE sandboxes ENABLE ROW LEVEL SECURITY;"
     "CREATE POLICY sandboxes_placed ON sandboxes USING (node = current_user)"
     "  WITH CHECK (node = current_user);"
     "ALTER TABLE credentials ENABLE ROW LEVEL SECURITY;"
     "CREATE POLICY credentials_placed ON credentials FOR SELECT USING (tenant_id IN"
     "  (SELECT tenant_id FROM sandboxes WHERE state NOT IN ('deleted','failed')));"
     "ALTER TABLE sandbox_network ENABLE ROW LEVEL SECURITY;"
     "CREATE POLICY sandbox_network_placed ON sandbox_network"
     "  USING (sandbox_id IN (SELECT id FROM sandboxes))"
     "  WITH CHECK (sandbox_id IN (SELECT id FROM sandboxes));"
     "ALTER TABLE sandbox_ingress ENABLE ROW LEVEL SECURITY;"
     "CREATE POLICY sandbox_ingress_placed ON sandbox_ingress"
     "  USING (sandbox_id IN (SELECT id FROM sandboxes))"
     "  WITH CHECK (sandbox_id IN (SELECT id FROM sandboxes));"
     "ALTER TABLE sessions ENABLE ROW LEVEL SECURITY;"
     "CREATE POLICY sessions_placed ON sessions USING (sandbox_id IN (SELECT id FROM sandboxes))"
     "  WITH CHECK (sandbox_id IN (SELECT id FROM sandboxes));"
     "ALTER TABLE operations ENABLE ROW LEVEL SECURITY;"
     "CREATE POLICY operations_placed ON operations"
     "  USING (sandbox_id IN (SELECT id FROM sandboxes))"
     "  WITH CHECK (sandbox_id IN (SELECT id FROM sandboxes));"
     "ALTER TABLE events ENABLE ROW LEVEL SECURITY;"
     "CREATE POLICY events_placed ON events USING (sandbox_id IN (SELECT id FROM sandboxes))"
     "  WITH CHECK (sandbox_id IN (SELECT id FROM sandboxes));"
     "ALTER TABLE sandbox_logs ENABLE ROW LEVEL SECURITY;"
     "CREATE POLICY sandbox_logs_placed ON sandbox_logs"
     "  USING (sandbox_id IN (SELECT id FROM sandboxes))"
     "  WITH CHECK (sandbox_id IN (SELECT id FROM sandboxes));"
     "ALTER TABLE meta ENABLE ROW LEVEL SECURITY;"
     "CREATE POLICY meta_read ON meta FOR SELECT USING (true);"
     "CREATE POLICY meta_own_token_insert ON meta FOR INSERT"
     "  WITH CHECK (key = 'node_token_sha256:' || current_user);"
     "CREATE POLICY meta_own_token_update ON meta FOR UPDATE"
     "  USING (key = 'node_token_sha256:' || current_user)"
     "  WITH CHECK (key = 'node_token_sha256:' || current_user);",
     true},
    // Credentials reach a node only for the sandboxes it runs (issue 24):
    // their values are sealed at rest under the API replicas' key, and a
    // replica seals each sandbox's again for the node it places it on, under
    // a key from that node's token (cluster/credential_share.h). A node's
    // role reads no row of credentials any more, and of these only the live
    // sandboxes' placed on it.
    {14,
     "CREATE TABLE sandbox_credentials (sandbox_id TEXT NOT NULL, name TEXT NOT NULL,"
     "  sealed TEXT NOT NULL, PRIMARY KEY (sandbox_id, name));"},
    {15,
     "DROP POLICY credentials_placed ON credentials;"
     "ALTER TABLE sandbox_credentials ENABLE ROW LEVEL SECURITY;"
     "CREATE POLICY sandbox_credentials_placed ON sandbox_credentials FOR SELECT"
     "  USING (sandbox_id IN (SELECT id FROM sandboxes WHERE state NOT IN ('deleted','failed')));",
     true},
    // Volumes (issue 27, docs/volumes.md): named filesystems a tenant owns,
    // on the node that holds their image ('' on one machine); a snapshot
    // or clone names its source. volume_mounts: which sandbox mounts which
    // volume where (filled at sandbox create); a volume named there is
    // not deleted unless forced.
    {16,
     "CREATE TABLE volumes (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id),"
     "  name TEXT NOT NULL, size_mib {i64} NOT NULL, read_only {i64} NOT NULL DEFAULT 0,"
     "  source_id TEXT NOT NULL DEFAULT '', node TEXT NOT NULL DEFAULT '',"
     "  created_ms {i64} NOT NULL, UNIQUE (tenant_id, name));"
     "CREATE INDEX volumes_node ON volumes(node);"
     "CREATE TABLE volume_mounts (sandbox_id TEXT NOT NULL, volume_id TEXT NOT NULL,"
     "  path TEXT NOT NULL, read_only {i64} NOT NULL DEFAULT 0, PRIMARY KEY (sandbox_id, path));"
     "CREATE INDEX volume_mounts_volume ON volume_mounts(volume_id);"},
    // A node's role reads only the volumes placed on it and the mounts of
    // its own sandboxes (store/node_roles.h).
    {17,
     "ALTER TABLE volumes ENABLE ROW LEVEL SECURITY;"
     "CREATE POLICY volumes_placed ON volumes FOR SELECT USING (node = current_user);"
     "ALTER TABLE volume_mounts ENABLE ROW LEVEL SECURITY;"
     "CREATE POLICY volume_mounts_placed ON volume_mounts FOR SELECT"
     "  USING (sandbox_id IN (SELECT id FROM sandboxes));",
     true},
    // Volumes on many machines (issue 27, item 6): each node reports the
    // space it has for volume images (MiB free where it keeps them; 0: it
    // keeps none, it cannot mount them in sandboxes), and an API replica
    // places a new volume by it.
    {18, "ALTER TABLE nodes ADD COLUMN volume_free_mib {i64} NOT NULL DEFAULT 0;"},
    // Node roles made before migration 17 (`vessel node add` then granted
    // no volumes) read their volumes too: every role holding SELECT on
    // sandbox_credentials, which only node roles are granted, gets the
    // grants a new node role has (store/node_roles.cc); the policies of
    // migration 17 narrow the rows.
    {19,
     "DO $$ DECLARE r record; BEGIN"
     "  FOR r IN SELECT DISTINCT a.grantee::regrole::text AS role"
     "    FROM pg_class c, aclexplode(c.relacl) a"
     "    WHERE c.oid = 'sandbox_credentials'::regclass AND a.privilege_type = 'SELECT'"
     "      AND a.grantee <> c.relowner AND a.grantee <> 0"
     "  LOOP EXECUTE 'GRANT SELECT ON volumes, volume_mounts TO ' || r.role; END LOOP;"
     " END $$;",
     true},
    // The volumes a template made from a sandbox expects (issue 27, item
    // 3): by name in its tenant's volumes, mounted where the sandbox had
    // them by a create from it that names none.
    {20,
     "CREATE TABLE template_volumes (tenant_id TEXT NOT NULL, template TEXT NOT NULL,"
     "  name TEXT NOT NULL, path TEXT NOT NULL, read_only {i64} NOT NULL DEFAULT 0,"
     "  PRIMARY KEY (tenant_id, template, path));"},
};

}  // namespace

std::vector<Migration> migrations(Dialect d) {
  std::vector<Migration> out;
  for (const auto& t : kTemplates)
    out.push_back({t.number, t.postgres_only && d != Dialect::kPostgres ? std::string("SELECT 1")
                                                                        : renderSql(d, t.sql)});
  return out;
}

Status checkKnown(const std::set<int>& applied) {
  auto known = migrations(Dialect::kSqlite);
  for (int n : applied) {
    bool found = false;
    for (const auto& m : known) found = found || m.number == n;
    if (!found)
      return Error(Code::kFailedPrecondition,
                   "database has migration " + std::to_string(n) +
                       ", which this vesseld does not know: it is newer");
  }
  return okStatus();
}

// Applies the migrations this database lacks (migrations.h), in one
// transaction under the dialect's migration lock. Databases from before
// schema_migrations (SQLite's user_version) count as having 1..N.
Result<int> migrateSchema(Sql& q, int64_t now_ms) {
  return q.transaction([&]() -> Result<int> {
    const auto& h = hooks(q.dialect());
    const auto known = migrations(q.dialect());
    for (const auto& lock : h.migration_lock) VESSEL_TRY(q.exec(lock));
    VESSEL_ASSIGN_OR_RETURN(auto has_table, q.one(int0, h.has_migrations_table));
    if (has_table.value_or(0) == 0)
      VESSEL_TRY(
          q.script("CREATE TABLE IF NOT EXISTS schema_migrations (number {i64} PRIMARY KEY,"
                   " applied_ms {i64} NOT NULL)"));
    VESSEL_ASSIGN_OR_RETURN(auto numbers, q.all(int0, "SELECT number FROM schema_migrations"));
    std::set<int> applied(numbers.begin(), numbers.end());
    auto record = [&](int n) {
      return q.exec("INSERT INTO schema_migrations(number, applied_ms) VALUES(?,?)", n, now_ms);
    };
    if (applied.empty() && !h.legacy_version_get.empty()) {
      VESSEL_ASSIGN_OR_RETURN(auto legacy, q.one(int0, h.legacy_version_get));
      const int n = static_cast<int>(legacy.value_or(0));
      if (n > known.back().number)
        return Error(Code::kFailedPrecondition, "database schema version " + std::to_string(n) +
                                                    " is newer than this vesseld knows (" +
                                                    std::to_string(known.back().number) + ")");
      for (int i = 1; i <= n; ++i) {
        VESSEL_TRY(record(i));
        applied.insert(i);
      }
    }
    VESSEL_TRY(checkKnown(applied));
    for (const auto& m : known) {
      if (applied.count(m.number)) continue;
      VESSEL_TRY_CTX(q.script(m.sql), "migration " + std::to_string(m.number));
      VESSEL_TRY(record(m.number));
      applied.insert(m.number);
    }
    const int version = *applied.rbegin();
    if (std::string set = h.legacy_version_set; !set.empty()) {
      set.replace(set.find("{n}"), 3, std::to_string(version));
      VESSEL_TRY(q.script(set));
    }
    return version;
  });
}

}  // namespace vessel::store
