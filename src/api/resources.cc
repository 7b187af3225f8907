#include "api/resources.h"

#include <boost/json.hpp>
#include <charconv>
#include <ctime>

#include "api/http_names.h"
#include "base/env_var.h"
#include "base/rfc3339.h"
#include "base/sha256.h"
#include "http/json_fields.h"

namespace vessel::api {

namespace json = boost::json;

namespace {

constexpr size_t kMaxEnv = 64, kMaxMetadata = 32, kMaxKey = 63, kMaxValue = 1024;
// A year: far beyond any deployment's cap, which is applied after parsing.
constexpr int64_t kMaxSeconds = 366 * 24 * 3600;

Error bad(const std::string& what) { return badRequest(what); }

}  // namespace

bool validId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

Result<CreateRequest> parseCreateRequest(std::string_view body) {
  CreateRequest r;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return r;
  VESSEL_ASSIGN_OR_RETURN(json::object o, parseObject(body, 8));
  const json::value* net = o.if_contains("network");
  const json::value* creds = o.if_contains("credentials");
  if (net || creds) {
    // Credentials without a network object: the default mode (full).
    json::value none_given = json::object();
    VESSEL_ASSIGN_OR_RETURN(r.network, parseNetworkSettings(net ? *net : none_given, creds));
  }
  for (const auto& [k, f] : o) {
    if (k == "template") {
      if (!f.is_string() || f.as_string().empty() || f.as_string().size() > 64)
        return bad("template must be a non-empty string of at most 64 characters");
      r.template_name = std::string(f.as_string());
    } else if (k == "vcpus") {
      VESSEL_ASSIGN_OR_RETURN(int64_t n, intField(f, "vcpus", 1, 64));
      r.vcpus = static_cast<unsigned>(n);
    } else if (k == "memory_mib") {
      VESSEL_ASSIGN_OR_RETURN(int64_t n, intField(f, "memory_mib", 64, 1 << 20));
      r.memory_mib = static_cast<uint64_t>(n);
    } else if (k == "disk_mib") {
      VESSEL_ASSIGN_OR_RETURN(int64_t n, intField(f, "disk_mib", 64, int64_t{1} << 24));
      r.disk_mib = static_cast<uint64_t>(n);
    } else if (k == "timeout") {
      VESSEL_ASSIGN_OR_RETURN(r.timeout_s, intField(f, "timeout", 0, kMaxSeconds));
    } else if (k == "lifetime") {
      VESSEL_ASSIGN_OR_RETURN(r.lifetime_s, intField(f, "lifetime", 1, kMaxSeconds));
    } else if (k == "env") {
      if (!f.is_object()) return bad("env must be an object of strings");
      if (f.as_object().size() > kMaxEnv) return bad("env has too many entries");
      for (const auto& [ek, ev] : f.as_object()) {
        if (!portableEnvName(ek, kMaxKey))
          return bad("env: bad variable name '" + std::string(ek) + "'");
        if (!ev.is_string() || ev.as_string().size() > kMaxValue || !envValue(ev.as_string()))
          return bad("env." + std::string(ek) + " must be a string of at most 1024 bytes, no NUL");
        r.env.push_back(std::string(ek) + "=" + std::string(ev.as_string()));
      }
    } else if (k == "metadata") {
      if (!f.is_object()) return bad("metadata must be an object of strings");
      if (f.as_object().size() > kMaxMetadata) return bad("metadata has too many entries");
      for (const auto& [mk, mv] : f.as_object()) {
        if (mk.empty() || mk.size() > kMaxKey) return bad("metadata: bad key");
        if (!mv.is_string() || mv.as_string().size() > kMaxValue)
          return bad("metadata." + std::string(mk) + " must be a string of at most 1024 bytes");
      }
      r.metadata = f.as_object();
    } else if (k == "network" || k == "credentials") {
      // parsed above
    } else if (k == "cold") {
      if (!f.is_bool()) return bad("cold must be a boolean");
      r.cold = f.as_bool();
    } else if (k == "on_timeout") {
      if (!f.is_string() || (f.as_string() != "delete" && f.as_string() != "pause"))
        return bad("on_timeout must be \"delete\" or \"pause\"");
      r.pause_on_timeout = f.as_string() == "pause";
    } else if (k == "pause_memory") {
      if (!f.is_bool()) return bad("pause_memory must be a boolean");
      r.pause_memory = f.as_bool();
    } else if (k == "auto_resume") {
      if (!f.is_bool()) return bad("auto_resume must be a boolean");
      r.auto_resume = f.as_bool();
    } else if (k == "volumes") {
      VESSEL_ASSIGN_OR_RETURN(r.volumes, parseVolumeMounts(f));
    } else {
      return bad("unknown field '" + std::string(k) + "'");
    }
  }
  return r;
}

Result<bool> parsePauseRequest(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return true;
  VESSEL_ASSIGN_OR_RETURN(json::object o, parseObject(body));
  bool memory = true;
  for (const auto& [k, f] : o) {
    if (k != "memory") return bad("unknown field '" + std::string(k) + "'");
    if (!f.is_bool()) return bad("memory must be a boolean");
    memory = f.as_bool();
  }
  return memory;
}

Result<ForkRequest> parseForkRequest(std::string_view body) {
  ForkRequest r;
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return r;
  VESSEL_ASSIGN_OR_RETURN(json::object o, parseObject(body));
  for (const auto& [k, f] : o) {
    if (k == "count") {
      VESSEL_ASSIGN_OR_RETURN(int64_t n, intField(f, "count", 1, 16));
      r.count = static_cast<int>(n);
    } else if (k == "template") {
      VESSEL_ASSIGN_OR_RETURN(r.template_name, strField(f, "template", 64));
      bool ok = !r.template_name.empty();
      for (char c : r.template_name)
        ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_');
      if (!ok) return bad("template must be 1 to 64 letters, digits, '-' or '_'");
    } else if (k == "volumes") {
      if (!f.is_string() || (f.as_string() != "share" && f.as_string() != "clone"))
        return bad("volumes must be \"share\" or \"clone\"");
      r.clone_volumes = f.as_string() == "clone";
    } else {
      return bad("unknown field '" + std::string(k) + "'");
    }
  }
  if (o.contains("count") && !r.template_name.empty())
    return bad("fork makes either count sandboxes or one template, not both");
  if (o.contains("volumes") && !r.template_name.empty())
    return bad("volumes is for a fork into sandboxes, not into a template");
  return r;
}

Result<ExtendRequest> parseExtendRequest(std::string_view body) {
  ExtendRequest r;
  VESSEL_ASSIGN_OR_RETURN(json::object o, parseObject(body));
  for (const auto& [k, f] : o) {
    if (k == "timeout") {
      VESSEL_ASSIGN_OR_RETURN(r.timeout_s, intField(f, "timeout", 0, kMaxSeconds));
    } else if (k == "lifetime") {
      VESSEL_ASSIGN_OR_RETURN(r.lifetime_s, intField(f, "lifetime", 1, kMaxSeconds));
    } else {
      return bad("unknown field '" + std::string(k) + "'");
    }
  }
  if (!r.timeout_s && !r.lifetime_s) return bad("extend needs timeout or lifetime (seconds)");
  return r;
}

Result<LogsQuery> parseLogsQuery(std::string_view target) {
  LogsQuery l;
  VESSEL_ASSIGN_OR_RETURN(auto params,
                          parseQuery(target, {"kind", "since", "after", "limit", "follow"}));
  for (const auto& [k, v] : params) {
    if (k == "kind") {
      if (!ops::knownLogKind(v)) return bad("kind must be " + std::string(ops::kLogKindNames));
      l.q.kind = v;
    } else if (k == "since") {
      auto ms = parseRfc3339(v);
      if (!ms.ok()) return std::move(ms).error().withContext("since");
      l.q.since_ms = *ms;
    } else if (k == "follow") {
      if (v != "true" && v != "false") return bad("follow must be true or false");
      l.follow = v == "true";
    } else {
      int64_t n = 0;
      auto [p, e] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (e != std::errc() || p != v.data() + v.size() || n < 0)
        return bad(k + " must be a non-negative integer");
      if (k == "after") {
        l.q.after_seq = n;
      } else {
        if (n < 1 || n > 1000) return bad("limit must be between 1 and 1000");
        l.q.limit = static_cast<int>(n);
      }
    }
  }
  return l;
}

Result<ListQuery> parseListQuery(std::string_view target) {
  ListQuery q;
  VESSEL_ASSIGN_OR_RETURN(auto params,
                          parseQuery(target, {"page_size", "page_token", "metadata."}));
  for (const auto& [k, v] : params) {
    if (k == "page_size") {
      int n = 0;
      auto [p, e] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (e != std::errc() || p != v.data() + v.size() || n < 1 || n > 100)
        return bad("page_size must be an integer between 1 and 100");
      q.page_size = n;
    } else if (k == "page_token") {
      if (!v.empty() && !validId(v)) return bad("bad page_token");
      q.page_token = v;
    } else {
      std::string key = k.substr(std::string_view("metadata.").size());
      if (key.size() > kMaxKey || v.size() > kMaxValue)
        return bad("metadata filter " + key.substr(0, 64) + " is too long");
      q.metadata[key] = v;
    }
  }
  return q;
}

}  // namespace vessel::api
