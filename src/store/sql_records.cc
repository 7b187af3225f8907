#include "store/sql_records.h"

#include <boost/json.hpp>

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
  r.metadata = readStringMap(s.text(7));
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
  if (!s.isNull(19)) r.ingress = readIngress(s.text(19));
  return r;
}
std::string sandboxesWhere(std::string_view rest) {
  // The ingress settings beside each row (none: NULL). The WHERE clauses
  // name sandboxes' columns unqualified; sandbox_ingress shares no name
  // with them.
  return "SELECT " + std::string(kSandboxCols) +
         ",sandbox_ingress.settings FROM sandboxes LEFT JOIN sandbox_ingress"
         " ON sandbox_ingress.sandbox_id=sandboxes.id " +
         std::string(rest);
}

std::map<std::string, std::string> readStringMap(std::string_view text) {
  std::map<std::string, std::string> out;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) return out;
  for (const auto& [k, val] : v.as_object())
    if (val.is_string()) out.emplace(std::string(k), std::string(val.as_string()));
  return out;
}

std::string stringMapJson(const std::map<std::string, std::string>& m) {
  boost::json::object o;
  for (const auto& [k, v] : m) o[k] = v;
  return boost::json::serialize(o);
}

IngressSettings readIngress(std::string_view text) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  auto i = ec ? Result<IngressSettings>(Error(Code::kInternal, "not JSON")) : decodeIngress(v);
  if (i.ok()) return *i;
  // Unreadable: private, so that a damaged row exposes nothing.
  IngressSettings closed;
  closed.public_traffic = false;
  return closed;
}

Result<std::optional<NetworkSettings>> readNetwork(const std::optional<std::string>& text,
                                                   const std::string& sandbox_id) {
  if (!text) return std::optional<NetworkSettings>();
  Error corrupt(Code::kInternal, "stored network settings of " + sandbox_id + " are corrupt");
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(*text, ec);
  if (ec) return corrupt;
  auto n = decodeNetwork(v);
  // A stored row always has its mode (the node's default applied).
  if (!n.ok() || n->mode.empty()) return corrupt;
  return std::optional<NetworkSettings>(std::move(*n));
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

Result<CredentialRecord> readCredential(const SqlRow& s) {
  CredentialRecord c{s.text(0), s.text(1), {}, s.text(3), s.text(4), s.integer(5)};
  Error corrupt(Code::kInternal, "credential '" + c.name + "': stored hosts are corrupt");
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(s.text(2), ec);
  if (ec || !v.is_array()) return corrupt;
  for (const auto& h : v.as_array()) {
    if (!h.is_string()) return corrupt;
    c.hosts.emplace_back(h.as_string());
  }
  return c;
}

std::vector<std::string> readStringList(std::string_view text) {
  std::vector<std::string> out;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_array()) return out;
  for (const auto& e : v.as_array())
    if (e.is_string()) out.emplace_back(e.as_string());
  return out;
}

std::string stringListJson(const std::vector<std::string>& v) {
  boost::json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return boost::json::serialize(a);
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
  n.templates = readStringList(s.text(7));
  n.accel = s.text(8);
  n.lost = s.text(9) == "lost";
  n.registered_ms = s.integer(10);
  n.heartbeat_ms = s.integer(11);
  n.envd_url = s.text(12);
  n.volume_free_mib = static_cast<uint64_t>(s.integer(13));
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
                    r.memory_mib, stringMapJson(r.metadata), r.created_ms, r.updated_ms,
                    r.idle_timeout_s, r.expires_ms, r.last_active_ms, r.disk_mib, r.node,
                    r.pause_on_timeout ? "pause" : "delete", r.pause_memory, r.auto_resume,
                    r.lifetime_s));
  // A new id has no settings yet: a row already there is refused (plain
  // INSERT), never adopted, and fails the caller's transaction with it.
  if (r.ingress)
    VESSEL_TRY(q.exec("INSERT INTO sandbox_ingress(sandbox_id,settings) VALUES(?,?)", r.id,
                      boost::json::serialize(encodeIngress(*r.ingress))));
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
