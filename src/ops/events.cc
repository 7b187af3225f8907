#include "ops/events.h"

#include <boost/json.hpp>
#include <cstdio>
#include <ctime>

namespace vessel::ops {

namespace json = boost::json;

std::string rfc3339(int64_t ms) {
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
  return buf;
}

json::object sandboxJson(const store::SandboxRecord& s) {
  json::object md;
  for (const auto& [k, v] : s.metadata) md[k] = v;
  json::object o{{"id", s.id},
                 {"template", s.template_name},
                 {"state", std::string(store::stateName(s.state))},
                 {"vcpus", s.vcpus},
                 {"memory_mib", s.memory_mib},
                 {"metadata", std::move(md)},
                 {"created_at", rfc3339(s.created_ms)},
                 {"updated_at", rfc3339(s.updated_ms)}};
  if (!s.error.empty()) o["error"] = s.error;
  if (!s.node.empty()) o["node"] = s.node;     // a cluster's; none on one machine
  if (s.disk_mib) o["disk_mib"] = s.disk_mib;  // 0: recorded before disk sizes
  o["timeout"] = s.idle_timeout_s;
  if (s.expires_ms > 0) o["expires_at"] = rfc3339(s.expires_ms);
  o["on_timeout"] = s.pause_on_timeout ? "pause" : "delete";
  if (s.pause_on_timeout && !s.pause_memory) o["pause_memory"] = false;
  o["auto_resume"] = s.auto_resume;
  return o;
}

json::object operationJson(const store::OperationRecord& op) {
  json::object o{{"id", op.id},
                 {"kind", op.kind},
                 {"sandbox_id", op.sandbox_id},
                 {"state", std::string(store::opStateName(op.state))},
                 {"created_at", rfc3339(op.created_ms)},
                 {"updated_at", rfc3339(op.updated_ms)}};
  if (!op.error_code.empty())
    o["error"] = json::object{{"code", op.error_code}, {"message", op.error_message}};
  return o;
}

json::object templateJson(const templates::Manifest& m, const std::string& name, bool builtin) {
  return json::object{{"name", name},
                      {"version", m.version},
                      {"vcpus", m.vcpus},
                      {"memory_mib", m.memory_mib},
                      {"disk_mib", m.disk_mib ? m.disk_mib : templates::kDefaultDiskMib},
                      {"builtin", builtin},
                      {"created_at", m.created_at}};
}

}  // namespace vessel::ops
