#include "store/sql_records.h"

namespace vessel::store {

std::string text0(const SqlRow& r) { return r.text(0); }
int64_t int0(const SqlRow& r) { return r.integer(0); }

SandboxRecord readSandbox(const SqlRow& s) {
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
std::string sandboxesWhere(std::string_view rest) {
  return "SELECT " + std::string(kSandboxCols) + " FROM sandboxes " + std::string(rest);
}

OperationRecord readOperation(const SqlRow& s) {
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
std::string operationsWhere(std::string_view rest) {
  return "SELECT " + std::string(kOperationCols) + " FROM operations " + std::string(rest);
}

TenantLimits readLimits(const SqlRow& s) {
  auto opt = [&](int col) { return s.isNull(col) ? std::nullopt : std::optional(s.integer(col)); };
  return TenantLimits{opt(0), opt(1), opt(2), opt(3)};
}
TenantUsage readUsage(const SqlRow& s) {
  return TenantUsage{s.integer(0), s.integer(1), s.integer(2), s.integer(3)};
}

EventRecord readEvent(const SqlRow& s) {
  return {s.integer(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5), s.integer(6)};
}
SessionRecord readSession(const SqlRow& s) {
  return {s.text(0), s.text(1), s.text(2), s.integer(3), s.integer(4)};
}

CredentialRecord readCredential(const SqlRow& s) {
  return {s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.integer(5)};
}

NodeRecord readNode(const SqlRow& s) {
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
  return n;
}

TemplateRecord readTemplate(const SqlRow& s) {
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

Status insertSandbox(Sql& q, const SandboxRecord& r) {
  VESSEL_TRY(q.exec("INSERT INTO sandboxes(" + std::string(kSandboxCols) +
                        ") VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    r.id, r.tenant_id, r.template_name, stateName(r.state), r.error, r.vcpus,
                    r.memory_mib, r.metadata_json, r.created_ms, r.updated_ms, r.idle_timeout_s,
                    r.expires_ms, r.last_active_ms, r.disk_mib, r.node,
                    r.pause_on_timeout ? "pause" : "delete", r.pause_memory, r.auto_resume,
                    r.lifetime_s));
  return okStatus();
}

Status insertOperation(Sql& q, const OperationRecord& o) {
  VESSEL_TRY(q.exec(
      "INSERT INTO operations(" + std::string(kOperationCols) + ") VALUES(?,?,?,?,?,?,?,?,?,?)",
      o.id, o.tenant_id, o.sandbox_id, o.kind, opStateName(o.state), o.error_code, o.error_message,
      o.created_ms, o.updated_ms, o.owner));
  return okStatus();
}

}  // namespace vessel::store
