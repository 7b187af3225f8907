#include "cluster/node_protocol.h"

#include <openssl/crypto.h>

#include <boost/json.hpp>

#include "templates/build_spec.h"

namespace vessel::cluster {

namespace json = boost::json;

namespace {

constexpr size_t kMaxId = 128;
constexpr size_t kMaxName = 256;
constexpr size_t kMaxList = 256;
constexpr size_t kMaxEnvEntry = 32 * 1024;
constexpr size_t kMaxCopies = 16;
constexpr uint64_t kMaxDiskMib = uint64_t{1} << 30;
constexpr size_t kMaxSpec = templates::kMaxNodeSpecBytes;  // the node's parseBuildSpec bound
constexpr size_t kMaxRegistrySecret = 4096;  // a credential's decoded value is at most 8 KiB
constexpr size_t kMaxManifest = 64 * 1024;

bool idChars(std::string_view s) {
  if (s.empty() || s.size() > kMaxId) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  return true;
}

Error bad(const std::string& what) { return Error(Code::kInvalidArgument, "node call: " + what); }

Result<std::string> stringField(const json::object& o, std::string_view key, size_t max,
                                bool required) {
  auto* v = o.if_contains(key);
  if (!v) {
    if (required) return bad(std::string(key) + " is missing");
    return std::string();
  }
  if (!v->is_string()) return bad(std::string(key) + " must be a string");
  if (v->as_string().size() > max) return bad(std::string(key) + " is too long");
  return std::string(v->as_string());
}

Result<std::vector<std::string>> stringList(const json::object& o, std::string_view key,
                                            size_t max_items, size_t max_len) {
  std::vector<std::string> out;
  auto* v = o.if_contains(key);
  if (!v) return out;
  if (!v->is_array()) return bad(std::string(key) + " must be an array");
  if (v->as_array().size() > max_items) return bad(std::string(key) + " has too many items");
  for (const auto& e : v->as_array()) {
    if (!e.is_string() || e.as_string().size() > max_len)
      return bad(std::string(key) + " must hold strings of at most " + std::to_string(max_len) +
                 " bytes");
    out.emplace_back(e.as_string());
  }
  return out;
}

json::array toArray(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(s);
  return a;
}

// Network settings as a call or a reply carries them: the store's codec.
json::object networkJson(const ops::NetworkSpec& n) { return store::encodeNetwork(n); }
Result<ops::NetworkSpec> parseNetwork(const json::value& n) {
  auto s = store::decodeNetwork(n);
  if (!s.ok()) return bad(s.error().message());
  return s;
}

Code codeFromName(std::string_view n) {
  for (Code c :
       {Code::kInvalidArgument, Code::kNotFound, Code::kAlreadyExists, Code::kFailedPrecondition,
        Code::kResourceExhausted, Code::kDeadlineExceeded, Code::kUnavailable, Code::kProtocol,
        Code::kPermissionDenied, Code::kUnauthenticated, Code::kInternal})
    if (codeName(c) == n) return c;
  return Code::kInternal;
}

json::object statusJson(const Status& s) {
  if (s.ok()) return json::object{{"ok", true}};
  return json::object{{"ok", false},
                      {"code", std::string(codeName(s.error().code()))},
                      {"message", s.error().message()}};
}

Result<Status> parseStatus(const json::value& v) {
  if (!v.is_object()) return Error(Code::kProtocol, "node reply: a status is not an object");
  const auto& o = v.as_object();
  auto* ok = o.if_contains("ok");
  if (!ok || !ok->is_bool()) return Error(Code::kProtocol, "node reply: no ok");
  if (ok->as_bool()) return Status(okStatus());
  auto* code = o.if_contains("code");
  auto* msg = o.if_contains("message");
  if (!code || !code->is_string() || !msg || !msg->is_string())
    return Error(Code::kProtocol, "node reply: an error without code and message");
  return Status(Error(codeFromName(code->as_string()), std::string(msg->as_string())));
}

}  // namespace

std::string_view holdingName(ops::Holding h) {
  switch (h) {
    case ops::Holding::kRunning: return "running";
    case ops::Holding::kPaused: return "paused";
    case ops::Holding::kNothing: break;
  }
  return "nothing";
}

Result<NodeCall> parseNodeCall(std::string_view body) {
  boost::system::error_code ec;
  json::parse_options po;
  po.max_depth = 8;
  json::value v = json::parse(body, ec, {}, po);
  if (ec || !v.is_object()) return bad("the body must be a JSON object");
  const auto& o = v.as_object();
  NodeCall c;
  VESSEL_ASSIGN_OR_RETURN(c.id, stringField(o, "id", kMaxId, false));
  if (!c.id.empty() && !idChars(c.id)) return bad("id has characters ids do not have");
  VESSEL_ASSIGN_OR_RETURN(c.tenant, stringField(o, "tenant", kMaxId, false));
  if (!c.tenant.empty() && !idChars(c.tenant)) return bad("tenant has characters ids do not have");
  VESSEL_ASSIGN_OR_RETURN(c.template_name, stringField(o, "template", kMaxName, false));
  VESSEL_ASSIGN_OR_RETURN(c.credential, stringField(o, "credential", kMaxName, false));
  VESSEL_ASSIGN_OR_RETURN(c.base, stringField(o, "base", kMaxName, false));
  VESSEL_ASSIGN_OR_RETURN(c.spec, stringField(o, "spec", kMaxSpec, false));
  VESSEL_ASSIGN_OR_RETURN(c.registry_username,
                          stringField(o, "registry_username", kMaxRegistrySecret, false));
  VESSEL_ASSIGN_OR_RETURN(c.registry_password,
                          stringField(o, "registry_password", kMaxRegistrySecret, false));
  VESSEL_ASSIGN_OR_RETURN(c.env, stringList(o, "env", kMaxList, kMaxEnvEntry));
  VESSEL_ASSIGN_OR_RETURN(c.copies, stringList(o, "copies", kMaxCopies, kMaxId));
  for (const auto& id : c.copies)
    if (!idChars(id)) return bad("copies hold an id with characters ids do not have");
  if (auto* cold = o.if_contains("cold")) {
    if (!cold->is_bool()) return bad("cold must be a boolean");
    c.cold = cold->as_bool();
  }
  if (auto* m = o.if_contains("memory")) {
    if (!m->is_bool()) return bad("memory must be a boolean");
    c.memory = m->as_bool();
  }
  if (auto* d = o.if_contains("disk_mib")) {
    if (!d->is_uint64() && !(d->is_int64() && d->as_int64() >= 0))
      return bad("disk_mib must be a non-negative integer");
    c.disk_mib = d->is_uint64() ? d->as_uint64() : static_cast<uint64_t>(d->as_int64());
    if (c.disk_mib > kMaxDiskMib) return bad("disk_mib is too large");
  }
  if (auto* n = o.if_contains("network"); n && !n->is_null()) {
    VESSEL_ASSIGN_OR_RETURN(c.network, parseNetwork(*n));
  }
  return c;
}

std::string serializeNodeCall(const NodeCall& c) {
  json::object o;
  if (!c.id.empty()) o["id"] = c.id;
  if (!c.tenant.empty()) o["tenant"] = c.tenant;
  if (!c.template_name.empty()) o["template"] = c.template_name;
  if (!c.credential.empty()) o["credential"] = c.credential;
  if (!c.base.empty()) o["base"] = c.base;
  if (!c.spec.empty()) o["spec"] = c.spec;
  if (!c.registry_username.empty()) o["registry_username"] = c.registry_username;
  if (!c.registry_password.empty()) o["registry_password"] = c.registry_password;
  if (!c.env.empty()) o["env"] = toArray(c.env);
  if (!c.copies.empty()) o["copies"] = toArray(c.copies);
  if (c.cold) o["cold"] = true;
  if (!c.memory) o["memory"] = false;
  if (c.disk_mib) o["disk_mib"] = c.disk_mib;
  if (c.network) o["network"] = networkJson(*c.network);
  return json::serialize(o);
}

std::string serializeNodeReply(const NodeReply& r) {
  json::object o = statusJson(r.status);
  o["holding"] = std::string(holdingName(r.holding));
  if (!r.copies.empty()) {
    json::array a;
    for (const auto& s : r.copies) a.emplace_back(statusJson(s));
    o["copies"] = std::move(a);
  }
  if (r.usage)
    o["usage"] = json::object{{"cpu_count", r.usage->cpu_count},
                              {"cpu_used_pct", r.usage->cpu_used_pct},
                              {"mem_used_bytes", r.usage->mem_used_bytes},
                              {"mem_total_bytes", r.usage->mem_total_bytes},
                              {"disk_used_bytes", r.usage->disk_used_bytes},
                              {"disk_total_bytes", r.usage->disk_total_bytes}};
  if (r.network) o["network"] = networkJson(*r.network);
  if (!r.manifest.empty()) o["manifest"] = r.manifest;
  return json::serialize(o);
}

Result<NodeReply> parseNodeReply(std::string_view body) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) return Error(Code::kProtocol, "node reply is not a JSON object");
  NodeReply r;
  VESSEL_ASSIGN_OR_RETURN(r.status, parseStatus(v));
  const auto& o = v.as_object();
  if (auto* h = o.if_contains("holding"); h && h->is_string()) {
    if (h->as_string() == "running") r.holding = ops::Holding::kRunning;
    if (h->as_string() == "paused") r.holding = ops::Holding::kPaused;
  }
  if (auto* m = o.if_contains("manifest"); m && m->is_string()) {
    if (m->as_string().size() > kMaxManifest)
      return Error(Code::kProtocol, "node reply: manifest is too long");
    r.manifest = std::string(m->as_string());
  }
  if (auto* c = o.if_contains("copies"); c && c->is_array())
    for (const auto& e : c->as_array()) {
      VESSEL_ASSIGN_OR_RETURN(Status s, parseStatus(e));
      r.copies.push_back(std::move(s));
    }
  if (auto* u = o.if_contains("usage"); u && u->is_object()) {
    const auto& uo = u->as_object();
    auto num = [&](const char* k) -> double {
      auto* f = uo.if_contains(k);
      if (!f) return 0;
      if (f->is_double()) return f->as_double();
      if (f->is_uint64()) return static_cast<double>(f->as_uint64());
      if (f->is_int64()) return static_cast<double>(f->as_int64());
      return 0;
    };
    // Clamped before the conversions: a double out of an integer's range
    // converts to nothing defined.
    auto bytes = [&](const char* k) -> uint64_t {
      double d = num(k);
      if (!(d > 0)) return 0;
      return d >= 1.8e19 ? uint64_t{1} << 63 : static_cast<uint64_t>(d);
    };
    ops::Usage us;
    double cpus = num("cpu_count");
    us.cpu_count = cpus >= 1 && cpus <= 65536 ? static_cast<unsigned>(cpus) : 1;
    us.cpu_used_pct = num("cpu_used_pct");
    us.mem_used_bytes = bytes("mem_used_bytes");
    us.mem_total_bytes = bytes("mem_total_bytes");
    us.disk_used_bytes = bytes("disk_used_bytes");
    us.disk_total_bytes = bytes("disk_total_bytes");
    r.usage = us;
  }
  if (auto* n = o.if_contains("network"); n && !n->is_null()) {
    auto net = parseNetwork(*n);
    if (!net.ok()) return Error(Code::kProtocol, "node reply: " + net.error().message());
    r.network = std::move(*net);
  }
  return r;
}

bool tokenMatches(std::string_view presented, std::string_view expected) {
  if (expected.empty() || presented.size() != expected.size()) return false;
  return CRYPTO_memcmp(presented.data(), expected.data(), expected.size()) == 0;
}

}  // namespace vessel::cluster
