#include "e2b/requests.h"

#include <arpa/inet.h>

#include <boost/json.hpp>
#include <charconv>
#include <ctime>

#include "base/env_var.h"
#include "gateway/credentials/scrubber.h"
#include "gateway/policy/policy.h"
#include "http/json_fields.h"

namespace vessel::e2b {

namespace json = boost::json;

namespace {

constexpr size_t kMaxEntries = 64, kMaxKey = 128, kMaxValue = 1024, kMaxRules = 256;
// E2B's own cap is a day for paying teams; the deployment's cap applies later.
constexpr int64_t kMaxSeconds = 366 * 24 * 3600;
constexpr std::string_view kAllTraffic = "0.0.0.0/0";

Error bad(const std::string& what) { return Error(Code::kInvalidArgument, what); }

Error noMapping(const std::string& what) {
  return bad(what + ": Vessel has no mapping for this E2B feature");
}

// Bodies the SDK sends may be empty or "null" where the spec allows no body.
Result<json::object> objectOrEmpty(std::string_view body) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) return json::object();
  std::string_view trimmed = body.substr(body.find_first_not_of(" \t\r\n"));
  if (trimmed.rfind("null", 0) == 0 && trimmed.find_first_not_of(" \t\r\n", 4) == std::string::npos)
    return json::object();
  return http::parseObject(body, 10);
}

bool isNull(const json::value& v) { return v.is_null(); }

Result<std::map<std::string, std::string>> stringMap(const json::value& v, std::string_view what,
                                                     bool env) {
  std::map<std::string, std::string> out;
  if (isNull(v)) return out;
  if (!v.is_object()) return bad(std::string(what) + " must be an object of strings");
  if (v.as_object().size() > kMaxEntries) return bad(std::string(what) + " has too many entries");
  for (const auto& [k, val] : v.as_object()) {
    std::string key(k);
    if (env ? !portableEnvName(key, kMaxKey) : (key.empty() || key.size() > kMaxKey))
      return bad(std::string(what) + ": bad key '" + key.substr(0, 64) + "'");
    if (!val.is_string() || val.as_string().size() > kMaxValue ||
        (env && !envValue(val.as_string())))
      return bad(std::string(what) + "." + key + " must be a string of at most 1024 bytes" +
                 (env ? ", no NUL" : ""));
    out[key] = std::string(val.as_string());
  }
  return out;
}

bool ipOrCidr(std::string_view s) {
  if (s.find('/') != std::string_view::npos) return true;
  std::string z(s);
  unsigned char buf[16];
  return ::inet_pton(AF_INET, z.c_str(), buf) == 1 || ::inet_pton(AF_INET6, z.c_str(), buf) == 1;
}

Result<std::vector<std::string>> stringList(const json::value& v, std::string_view what) {
  std::vector<std::string> out;
  if (isNull(v)) return out;
  if (!v.is_array() || v.as_array().size() > kMaxRules)
    return bad(std::string(what) + " must be an array of at most 256 strings");
  for (const auto& e : v.as_array()) {
    if (!e.is_string() || e.as_string().empty() || e.as_string().size() > 300)
      return bad(std::string(what) + " holds a non-string or an empty or over-long entry");
    out.emplace_back(e.as_string());
  }
  return out;
}

// {host: [{transform: {headers: {name: value}}}, {}]}
Status parseRules(const json::value& v, std::vector<HeaderRule>& out) {
  if (isNull(v)) return okStatus();
  if (!v.is_object() || v.as_object().size() > kMaxEntries)
    return bad("network.rules must be an object of at most 64 hosts");
  for (const auto& [host, list] : v.as_object()) {
    std::string h(host);
    if (h.empty() || h.size() > 253 || ipOrCidr(h) || h.find('*') != std::string::npos)
      return bad("network.rules: '" + h.substr(0, 64) + "' is not a host name");
    if (!list.is_array() || list.as_array().size() > 16)
      return bad("network.rules." + h + " must be an array of at most 16 rules");
    for (const auto& rule : list.as_array()) {
      if (!rule.is_object()) return bad("network.rules." + h + " holds a non-object");
      for (const auto& [rk, rv] : rule.as_object()) {
        if (rk != "transform") return noMapping("network.rules." + h + "." + std::string(rk));
        if (isNull(rv)) continue;
        if (!rv.is_object()) return bad("network.rules." + h + ".transform must be an object");
        for (const auto& [tk, tv] : rv.as_object()) {
          if (tk != "headers")
            return noMapping("network.rules." + h + ".transform." + std::string(tk) +
                             " (only header injection is)");
          VESSEL_ASSIGN_OR_RETURN(auto headers, stringMap(tv, "transform.headers", false));
          for (auto& [name, value] : headers) {
            if (!http::injectableHeader(name))
              return bad("network.rules." + h + ": '" + name.substr(0, 64) +
                         "' is not a header the gateway may set");
            if (value.empty()) return bad("network.rules." + h + ": header " + name + " is empty");
            out.push_back({h, name, value});
          }
        }
      }
    }
  }
  return okStatus();
}

// maskRequestHost: a Host header value, with ${PORT} where the port goes.
Result<std::string> maskHost(const json::value& v) {
  if (isNull(v)) return std::string();
  if (!v.is_string()) return bad("network.maskRequestHost must be a string");
  std::string_view m = v.as_string();
  if (m.size() > 255) return bad("network.maskRequestHost is longer than 255 bytes");
  for (char c : m)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return bad("network.maskRequestHost holds spaces or control characters");
  return std::string(m);
}

// The E2B network object (create or update) and allow_internet_access;
// the create's ingress settings go to `ingress`, and whether any egress
// setting was given to `egress_given`.
// Long because it is the one reader of E2B's network object: every field
// is checked in one place, beside the others it conflicts with.
Result<Egress> parseEgress(const json::value* network, const json::value* internet, bool update,
                           Ingress* ingress = nullptr, bool* egress_given = nullptr) {
  Egress e;
  if (egress_given) *egress_given = internet && !isNull(*internet);
  std::vector<std::string> allow_out, deny_out;
  if (internet && !isNull(*internet)) {
    if (!internet->is_bool()) return bad("allow_internet_access must be a boolean");
    e.internet = internet->as_bool();
  }
  if (network && !isNull(*network)) {
    if (!network->is_object()) return bad("network must be an object");
    for (const auto& [k, v] : network->as_object()) {
      bool ingress_key = (k == "allowPublicTraffic" || k == "maskRequestHost") && !update;
      if (egress_given && !ingress_key && !isNull(v)) *egress_given = true;
      if (k == "allowOut") {
        VESSEL_ASSIGN_OR_RETURN(allow_out, stringList(v, "network.allowOut"));
      } else if (k == "denyOut") {
        VESSEL_ASSIGN_OR_RETURN(deny_out, stringList(v, "network.denyOut"));
      } else if (k == "rules") {
        VESSEL_TRY(parseRules(v, e.headers));
      } else if (k == "egressProxy") {
        if (!isNull(v))
          return noMapping("network.egressProxy (egress goes through Vessel's gateway)");
      } else if (k == "allowPublicTraffic" && !update) {
        // Sandbox ports: false asks for the traffic token on every request.
        if (!isNull(v) && !v.is_bool()) return bad("network.allowPublicTraffic must be a boolean");
        if (ingress && v.is_bool()) ingress->public_traffic = v.as_bool();
      } else if (k == "maskRequestHost" && !update) {
        VESSEL_ASSIGN_OR_RETURN(std::string m, maskHost(v));
        if (ingress) ingress->mask_host = std::move(m);
      } else if (k == "allow_internet_access" && update) {
        if (!isNull(v) && !v.is_bool()) return bad("allow_internet_access must be a boolean");
        if (v.is_bool()) e.internet = v.as_bool();
      } else if (k == "maskRequestHost" || k == "httpsPorts") {
        if (!isNull(v)) return noMapping("network." + std::string(k));
      } else {
        return bad("network: unknown field '" + std::string(k) + "'");
      }
    }
  }
  // E2B: denyOut holds addresses and CIDR ranges ("0.0.0.0/0": everything);
  // allowOut names, addresses and ranges, which take precedence over it.
  namespace pol = gateway::policy;
  bool deny_all = e.internet == false;
  std::vector<std::string> denied;
  for (const auto& d : deny_out) {
    if (d == kAllTraffic) {
      deny_all = true;
    } else if (!pol::looksLikeAddress(d)) {
      return bad("network.denyOut '" + d.substr(0, 64) +
                 "': only IP addresses and CIDR ranges can be denied");
    } else if (auto c = pol::parseDenyRange(d); !c.ok()) {
      return bad("network.denyOut: " + c.error().message());
    } else {
      denied.push_back(d);
    }
  }
  bool allow_all = false;
  std::vector<std::string> allowed, addresses;
  for (const auto& a : allow_out) {
    if (a == kAllTraffic) {
      allow_all = true;
      continue;
    }
    bool address = pol::looksLikeAddress(a);
    if (address) {
      if (auto r = pol::parseAllowAddress(a); !r.ok())
        return bad("network.allowOut: " + r.error().message());
      addresses.push_back(a);
    } else if (auto r = pol::parseRule(a); !r.ok()) {
      return bad("network.allowOut '" + a.substr(0, 64) + "': " + r.error().message());
    }
    allowed.push_back(a);
  }
  if (!allow_all) e.spec.deny = std::move(denied);  // everything allowed wins over any deny
  if (deny_all && !allow_all) {
    e.spec.mode = "allowlist";
    e.spec.allow = std::move(allowed);
  } else {
    // Every name is allowed; allowed addresses are the exceptions to denyOut.
    e.spec.mode = "full";
    e.spec.allow = std::move(addresses);
  }
  return e;
}

Result<int64_t> seconds(const json::value& v, std::string_view name) {
  return http::intField(v, name, 0, kMaxSeconds);
}

}  // namespace

Result<NewSandbox> parseNewSandbox(std::string_view body, bool v2) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, http::parseObject(body, 10));
  NewSandbox r;
  if (v2) r.timeout_s = 300;
  bool have_template = false;
  for (const auto& [k, v] : o) {
    if (k == "templateID") {
      VESSEL_ASSIGN_OR_RETURN(r.template_id, http::strField(v, "templateID", 128));
      have_template = !r.template_id.empty();
    } else if (k == "timeout") {
      if (!isNull(v)) {
        VESSEL_ASSIGN_OR_RETURN(r.timeout_s, seconds(v, "timeout"));
      }
    } else if (k == "metadata") {
      VESSEL_ASSIGN_OR_RETURN(r.metadata, stringMap(v, "metadata", false));
    } else if (k == "envVars") {
      VESSEL_ASSIGN_OR_RETURN(auto env, stringMap(v, "envVars", true));
      for (auto& [ek, ev] : env) r.env.push_back(ek + "=" + ev);
    } else if (k == "secure" && !v2) {
      // Vessel secures every sandbox's envd with its access token.
      if (!isNull(v) && !v.is_bool()) return bad("secure must be a boolean");
    } else if (k == "allow_internet_access" || k == "network") {
      // below, together
    } else if (k == "autoPause") {
      if (!isNull(v) && !v.is_bool()) return bad("autoPause must be a boolean");
      r.auto_pause = v.is_bool() && v.as_bool();
    } else if (k == "autoPauseMemory") {
      if (!isNull(v) && !v.is_bool()) return bad("autoPauseMemory must be a boolean");
      r.auto_pause_memory = !v.is_bool() || v.as_bool();
    } else if (k == "autoResume") {
      if (!isNull(v)) {
        if (!v.is_object()) return bad("autoResume must be an object {enabled}");
        for (const auto& [ak, av] : v.as_object()) {
          if (ak != "enabled") return bad("unknown field 'autoResume." + std::string(ak) + "'");
          if (!av.is_bool()) return bad("autoResume.enabled must be a boolean");
          r.auto_resume = av.as_bool();
        }
      }
    } else if (k == "volumeMounts") {
      VESSEL_ASSIGN_OR_RETURN(r.volumes, parseVolumeMounts(v));
    } else if (k == "iam") {
      if (!isNull(v)) return noMapping("iam (workload identity tokens)");
    } else if (k == "mcp") {
      // The SDK starts the MCP gateway itself, with a command in the sandbox.
      if (!isNull(v) && !v.is_object()) return bad("mcp must be an object");
    } else {
      return bad("unknown field '" + std::string(k) + "'");
    }
  }
  if (!have_template) return bad("templateID is required");
  // E2B's own rules (the SDK checks them too, for typed callers).
  if (r.auto_resume && !r.auto_pause) return bad("autoResume needs autoPause");
  if (!r.auto_pause_memory && !r.auto_pause) return bad("autoPauseMemory needs autoPause");
  if (r.auto_resume && !r.auto_pause_memory)
    return bad(
        "autoResume cannot be combined with autoPauseMemory: false (a filesystem-only pause "
        "must be resumed explicitly, with connect)");
  const json::value* net = o.if_contains("network");
  const json::value* internet = o.if_contains("allow_internet_access");
  if ((net && !isNull(*net)) || (internet && !isNull(*internet))) {
    bool egress_given = false;
    VESSEL_ASSIGN_OR_RETURN(auto e, parseEgress(net, internet, false, &r.ingress, &egress_given));
    // Only ingress settings: the egress stays the node's default.
    if (egress_given) r.egress = std::move(e);
  }
  return r;
}

Result<int64_t> parseConnect(std::string_view body, bool v2) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, objectOrEmpty(body));
  std::optional<int64_t> timeout;
  for (const auto& [k, v] : o) {
    if (k == "timeout") {
      if (!isNull(v)) {
        VESSEL_ASSIGN_OR_RETURN(timeout, seconds(v, "timeout"));
      }
    } else if (k == "memory") {
      if (!isNull(v) && !v.is_bool()) return bad("memory must be a boolean");
      if (v.is_bool() && !v.as_bool())
        return noMapping("memory: false (a resume without memory; Vessel resumes whole VMs)");
    } else {
      return bad("unknown field '" + std::string(k) + "'");
    }
  }
  if (!timeout && !v2) return bad("timeout is required");
  return timeout.value_or(300);
}

Result<int64_t> parseResume(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, objectOrEmpty(body));
  int64_t timeout = 15;
  for (const auto& [k, v] : o) {
    if (k == "timeout") {
      if (!isNull(v)) {
        VESSEL_ASSIGN_OR_RETURN(timeout, seconds(v, "timeout"));
      }
    } else if (k == "autoPause") {
      if (v.is_bool() && v.as_bool()) return noMapping("autoPause");
    } else if (k == "memory") {
      if (v.is_bool() && !v.as_bool()) return noMapping("memory: false");
    } else {
      return bad("unknown field '" + std::string(k) + "'");
    }
  }
  return timeout;
}

Result<int64_t> parseTimeout(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, http::parseObject(body));
  std::optional<int64_t> t;
  for (const auto& [k, v] : o) {
    if (k != "timeout") return bad("unknown field '" + std::string(k) + "'");
    VESSEL_ASSIGN_OR_RETURN(t, seconds(v, "timeout"));
  }
  if (!t) return bad("timeout is required");
  return *t;
}

Result<int64_t> parseRefresh(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, objectOrEmpty(body));
  int64_t d = 15;
  for (const auto& [k, v] : o) {
    if (k != "duration") return bad("unknown field '" + std::string(k) + "'");
    if (!isNull(v)) {
      VESSEL_ASSIGN_OR_RETURN(d, http::intField(v, "duration", 0, 3600));
    }
  }
  return d;
}

Result<bool> parsePause(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, objectOrEmpty(body));
  bool memory = true;
  for (const auto& [k, v] : o) {
    if (k != "memory") return bad("unknown field '" + std::string(k) + "'");
    if (!isNull(v) && !v.is_bool()) return bad("memory must be a boolean");
    if (v.is_bool()) memory = v.as_bool();
  }
  return memory;
}

Result<ForkRequest> parseFork(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, objectOrEmpty(body));
  ForkRequest r;
  for (const auto& [k, v] : o) {
    if (k == "count") {
      if (isNull(v)) continue;
      // Vessel forks at most 16 copies at once (E2B: 100).
      VESSEL_ASSIGN_OR_RETURN(int64_t n, http::intField(v, "count", 1, 16));
      r.count = static_cast<int>(n);
    } else if (k == "timeout") {
      if (!isNull(v)) {
        VESSEL_ASSIGN_OR_RETURN(r.timeout_s, seconds(v, "timeout"));
      }
    } else {
      return bad("unknown field '" + std::string(k) + "'");
    }
  }
  return r;
}

Result<std::string> parseSnapshot(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, objectOrEmpty(body));
  std::string name;
  for (const auto& [k, v] : o) {
    if (k != "name") return bad("unknown field '" + std::string(k) + "'");
    if (isNull(v)) continue;
    VESSEL_ASSIGN_OR_RETURN(name, http::strField(v, "name", 48));
    bool ok = !name.empty();
    for (char c : name)
      ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_');
    if (!ok) return bad("name must be 1 to 48 letters, digits, '-' or '_'");
  }
  return name;
}

Result<Egress> parseNetworkUpdate(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, objectOrEmpty(body));
  json::value net = o;
  return parseEgress(&net, nullptr, true);
}

bool secretName(std::string_view n) {
  if (n.empty() || n.size() > 63) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_'))
      return false;
  return true;
}

Result<SecretRequest> parseSecret(std::string_view body, bool create) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, http::parseObject(body));
  SecretRequest r;
  bool have_value = false;
  for (const auto& [k, v] : o) {
    if (k == "name" && create) {
      VESSEL_ASSIGN_OR_RETURN(r.name, http::strField(v, "name", 63));
      if (!secretName(r.name)) return bad("name must be 1 to 63 of [a-zA-Z0-9_-]");
    } else if (k == "value") {
      VESSEL_ASSIGN_OR_RETURN(r.value, http::strField(v, "value", 8192));
      for (char c : r.value)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
          return bad("value must not hold control characters (it becomes a header value)");
      have_value = !r.value.empty();
    } else if (k == "metadata") {
      // Not stored: a secret is a Vessel credential, which has none.
      VESSEL_ASSIGN_OR_RETURN(auto md, stringMap(v, "metadata", false));
      if (!md.empty()) return noMapping("secret metadata");
    } else {
      return bad("unknown field '" + std::string(k) + "'");
    }
  }
  if (create && r.name.empty()) return bad("name is required");
  if (!have_value) return bad("value is required and must not be empty");
  // As the native API: the gateway masks a secret in responses, and a short
  // one would be indistinguishable from ordinary text.
  if (r.value.size() < gateway::credentials::kMinSecretBytes)
    return bad("value must be at least 16 bytes");
  return r;
}

Result<std::pair<std::optional<int64_t>, std::optional<int64_t>>> parseMetricsRange(
    std::string_view target) {
  VESSEL_ASSIGN_OR_RETURN(auto params, http::parseQuery(target, {"start", "end"}));
  std::pair<std::optional<int64_t>, std::optional<int64_t>> r;
  for (const auto& [k, v] : params) {
    int64_t n = 0;
    auto [p, e] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (e != std::errc() || p != v.data() + v.size() || n < 0 || n > (int64_t{1} << 40))
      return bad(k + " must be Unix seconds");
    (k == "start" ? r.first : r.second) = n;
  }
  if (r.first && r.second && *r.first > *r.second) return bad("start is after end");
  return r;
}

Result<ListQuery> parseListQuery(std::string_view target, bool v2) {
  ListQuery q;
  if (!v2) q.states = {store::SandboxState::kRunning};
  VESSEL_ASSIGN_OR_RETURN(
      auto params, v2 ? http::parseQuery(target, {"metadata", "state", "order", "startedAfter",
                                                  "template", "limit", "nextToken"})
                      : http::parseQuery(target, {"metadata"}));
  for (const auto& [k, v] : params) {
    if (k == "metadata") {
      // "k1=v1&k2=v2", each key and value URL-encoded once more by the SDK.
      std::string_view rest = v;
      for (int n = 0; !rest.empty(); ++n) {
        if (n >= 32) return bad("metadata: at most 32 pairs");
        auto amp = rest.find('&');
        std::string_view pair = rest.substr(0, amp);
        rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
        if (pair.empty()) continue;
        auto eq = pair.find('=');
        if (eq == std::string_view::npos || eq == 0) return bad("metadata: pairs are KEY=VALUE");
        VESSEL_ASSIGN_OR_RETURN(std::string key, http::percentDecode(pair.substr(0, eq)));
        VESSEL_ASSIGN_OR_RETURN(std::string val, http::percentDecode(pair.substr(eq + 1)));
        VESSEL_ASSIGN_OR_RETURN(key, http::percentDecode(key));
        VESSEL_ASSIGN_OR_RETURN(val, http::percentDecode(val));
        if (key.empty() || key.size() > kMaxKey || val.size() > kMaxValue)
          return bad("metadata: a key or value is too long");
        q.metadata[key] = val;
      }
    } else if (k == "state") {
      std::string_view rest = v;
      for (int n = 0; !rest.empty() && n < 8; ++n) {
        auto comma = rest.find(',');
        std::string_view st = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        if (st == "running")
          q.states.insert(store::SandboxState::kRunning);
        else if (st == "paused")
          q.states.insert(store::SandboxState::kPaused);
        else
          return bad("state must be running and/or paused");
      }
      if (!rest.empty()) return bad("state: too many values");
    } else if (k == "order") {
      if (v != "asc" && v != "desc") return bad("order must be asc or desc");
      q.newest_first = v == "desc";
    } else if (k == "startedAfter") {
      auto after = parseRfc3339(v);
      if (!after.ok()) return std::move(after).error().withContext("startedAfter");
      q.started_after_ms = *after;
    } else if (k == "template") {
      if (v.empty() || v.size() > 128) return bad("template must be 1 to 128 characters");
      q.template_id = v;
    } else if (k == "limit") {
      int n = 0;
      auto [p, e] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (e != std::errc() || p != v.data() + v.size() || n < 1 || n > 100)
        return bad("limit must be an integer between 1 and 100");
      q.limit = n;
    } else if (k == "nextToken") {
      bool ok = !v.empty() && v.size() <= 64;
      for (char c : v) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
      if (!ok) return bad("bad nextToken");
      q.next_token = v;
    }
  }
  // Both by default: E2B lists running and paused sandboxes.
  if (q.states.empty()) q.states = {store::SandboxState::kRunning, store::SandboxState::kPaused};
  return q;
}

}  // namespace vessel::e2b
