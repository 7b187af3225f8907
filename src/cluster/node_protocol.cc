#include "cluster/node_protocol.h"

#include <openssl/crypto.h>

#include <boost/json.hpp>

#include "base/base64.h"
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
// A volume's path (volumes/files.h refuses longer ones), mounts of one
// sandbox (the API's bound), the entries of one listing
// (volumes::kMaxListEntries), a file name (ext4's).
constexpr size_t kMaxPath = 4096;
constexpr size_t kMaxMounts = 16;
constexpr size_t kMaxEntries = 10000;
constexpr size_t kMaxFileName = 255;
constexpr uint64_t kMaxVolumeMib = uint64_t{1} << 30;
// The header carrying a volume_write's call: base64 of at most this much.
constexpr size_t kMaxHeaderCall = 32 * 1024;

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

Result<bool> boolField(const json::object& o, std::string_view key, bool dflt) {
  auto* v = o.if_contains(key);
  if (!v) return dflt;
  if (!v->is_bool()) return bad(std::string(key) + " must be a boolean");
  return v->as_bool();
}

Result<uint64_t> uintField(const json::object& o, std::string_view key, uint64_t max) {
  auto* v = o.if_contains(key);
  if (!v) return uint64_t{0};
  if (!v->is_uint64() && !(v->is_int64() && v->as_int64() >= 0))
    return bad(std::string(key) + " must be a non-negative integer");
  uint64_t n = v->is_uint64() ? v->as_uint64() : static_cast<uint64_t>(v->as_int64());
  if (n > max) return bad(std::string(key) + " is too large");
  return n;
}

// A volume id as vesseld makes them (vol-<hex>); "" when absent.
Result<std::string> volumeId(const json::object& o, std::string_view key) {
  VESSEL_ASSIGN_OR_RETURN(auto id, stringField(o, key, kMaxId, false));
  for (char c : id)
    if (!std::islower(static_cast<unsigned char>(c)) &&
        !std::isdigit(static_cast<unsigned char>(c)) && c != '-')
      return bad(std::string(key) + " is not a volume id");
  return id;
}

Result<std::vector<ops::VolumeAttachment>> mountList(const json::object& o) {
  std::vector<ops::VolumeAttachment> out;
  auto* v = o.if_contains("mounts");
  if (!v) return out;
  if (!v->is_array()) return bad("mounts must be an array");
  if (v->as_array().size() > kMaxMounts) return bad("mounts has too many items");
  for (const auto& e : v->as_array()) {
    if (!e.is_object()) return bad("a mount must be an object");
    const auto& m = e.as_object();
    ops::VolumeAttachment a;
    VESSEL_ASSIGN_OR_RETURN(a.volume_id, volumeId(m, "volume"));
    VESSEL_ASSIGN_OR_RETURN(a.name, stringField(m, "name", kMaxName, false));
    VESSEL_ASSIGN_OR_RETURN(a.path, stringField(m, "path", kMaxPath, true));
    VESSEL_ASSIGN_OR_RETURN(a.read_only, boolField(m, "read_only", false));
    if (a.volume_id.empty() || a.path.empty() || a.path[0] != '/')
      return bad("a mount needs a volume and an absolute path");
    out.push_back(std::move(a));
  }
  return out;
}

json::object fileJson(const ops::VolumeFileInfo& f) {
  json::object o{{"name", f.name}, {"path", f.path}, {"type", f.type}, {"size", f.size},
                 {"mode", f.mode}, {"uid", f.uid},   {"gid", f.gid},   {"mtime_ms", f.mtime_ms}};
  if (!f.target.empty()) o["target"] = f.target;
  return o;
}

// A node's answer: untrusted bytes to the replica, bounded like a call.
Result<ops::VolumeFileInfo> parseFile(const json::value& v) {
  if (!v.is_object()) return bad("a file is not an object");
  const auto& o = v.as_object();
  ops::VolumeFileInfo f;
  VESSEL_ASSIGN_OR_RETURN(f.name, stringField(o, "name", kMaxFileName, false));
  VESSEL_ASSIGN_OR_RETURN(f.path, stringField(o, "path", kMaxPath + 1, true));
  VESSEL_ASSIGN_OR_RETURN(f.type, stringField(o, "type", 16, true));
  VESSEL_ASSIGN_OR_RETURN(f.target, stringField(o, "target", kMaxPath, false));
  VESSEL_ASSIGN_OR_RETURN(f.size, uintField(o, "size", uint64_t{1} << 62));
  VESSEL_ASSIGN_OR_RETURN(auto mode, uintField(o, "mode", 07777));
  VESSEL_ASSIGN_OR_RETURN(auto uid, uintField(o, "uid", UINT32_MAX));
  VESSEL_ASSIGN_OR_RETURN(auto gid, uintField(o, "gid", UINT32_MAX));
  f.mode = static_cast<uint32_t>(mode);
  f.uid = static_cast<uint32_t>(uid);
  f.gid = static_cast<uint32_t>(gid);
  auto* t = o.if_contains("mtime_ms");
  if (t && t->is_int64()) f.mtime_ms = t->as_int64();
  if (t && t->is_uint64() && t->as_uint64() <= INT64_MAX)
    f.mtime_ms = static_cast<int64_t>(t->as_uint64());
  return f;
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

// The volume calls' fields of a call (parseNodeCall).
Status parseVolumeFields(const json::object& o, NodeCall& c) {
  VESSEL_ASSIGN_OR_RETURN(c.volume, volumeId(o, "volume"));
  VESSEL_ASSIGN_OR_RETURN(c.volume_to, volumeId(o, "volume_to"));
  VESSEL_ASSIGN_OR_RETURN(c.size_mib, uintField(o, "size_mib", kMaxVolumeMib));
  VESSEL_ASSIGN_OR_RETURN(c.read_only, boolField(o, "read_only", false));
  VESSEL_ASSIGN_OR_RETURN(c.path, stringField(o, "path", kMaxPath, false));
  if (c.path.find('\0') != std::string::npos) return bad("path holds a NUL byte");
  VESSEL_ASSIGN_OR_RETURN(auto mode, uintField(o, "mode", 07777));
  c.mode = static_cast<uint32_t>(mode);
  VESSEL_ASSIGN_OR_RETURN(c.parents, boolField(o, "parents", false));
  VESSEL_ASSIGN_OR_RETURN(c.recursive, boolField(o, "recursive", false));
  VESSEL_ASSIGN_OR_RETURN(c.hold, boolField(o, "hold", false));
  VESSEL_ASSIGN_OR_RETURN(c.mounts, mountList(o));
  return okStatus();
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
  VESSEL_TRY(parseVolumeFields(o, c));
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
  if (!c.volume.empty()) o["volume"] = c.volume;
  if (!c.volume_to.empty()) o["volume_to"] = c.volume_to;
  if (c.size_mib) o["size_mib"] = c.size_mib;
  if (c.read_only) o["read_only"] = true;
  if (!c.path.empty()) o["path"] = c.path;
  if (c.mode) o["mode"] = c.mode;
  if (c.parents) o["parents"] = true;
  if (c.recursive) o["recursive"] = true;
  if (c.hold) o["hold"] = true;
  if (!c.mounts.empty()) {
    json::array a;
    for (const auto& m : c.mounts)
      a.push_back(json::object{
          {"volume", m.volume_id}, {"name", m.name}, {"path", m.path}, {"read_only", m.read_only}});
    o["mounts"] = std::move(a);
  }
  return json::serialize(o);
}

std::string encodeNodeCallHeader(const NodeCall& c) { return base64Encode(serializeNodeCall(c)); }

Result<NodeCall> parseNodeCallHeader(std::string_view value) {
  auto body = base64Decode(value, kMaxHeaderCall);
  if (!body.ok()) return bad(std::string(kNodeCallHeader) + " is not base64 of a call");
  return parseNodeCall(*body);
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
  if (!r.entries.empty()) {
    json::array a;
    for (const auto& f : r.entries) a.push_back(fileJson(f));
    o["entries"] = std::move(a);
  }
  if (r.file) o["file"] = fileJson(*r.file);
  if (r.volume_usage)
    o["volume_usage"] = json::object{{"used_bytes", r.volume_usage->used_bytes},
                                     {"free_bytes", r.volume_usage->free_bytes}};
  return json::serialize(o);
}

namespace {

// The volume calls' answers in a reply (parseNodeReply).
Status parseVolumeReply(const json::object& o, NodeReply& r) {
  if (auto* e = o.if_contains("entries")) {
    if (!e->is_array() || e->as_array().size() > kMaxEntries)
      return bad("entries must be an array of at most " + std::to_string(kMaxEntries));
    for (const auto& f : e->as_array()) {
      VESSEL_ASSIGN_OR_RETURN(auto info, parseFile(f));
      r.entries.push_back(std::move(info));
    }
  }
  if (auto* f = o.if_contains("file")) {
    VESSEL_ASSIGN_OR_RETURN(r.file, parseFile(*f));
  }
  if (auto* u = o.if_contains("volume_usage")) {
    if (!u->is_object()) return bad("volume_usage must be an object");
    ops::VolumeUsage use;
    VESSEL_ASSIGN_OR_RETURN(use.used_bytes,
                            uintField(u->as_object(), "used_bytes", uint64_t{1} << 62));
    VESSEL_ASSIGN_OR_RETURN(use.free_bytes,
                            uintField(u->as_object(), "free_bytes", uint64_t{1} << 62));
    r.volume_usage = use;
  }
  return okStatus();
}

}  // namespace

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
  if (auto s = parseVolumeReply(o, r); !s.ok())
    return Error(Code::kProtocol, "node reply: " + s.error().message());
  return r;
}

bool tokenMatches(std::string_view presented, std::string_view expected) {
  if (expected.empty() || presented.size() != expected.size()) return false;
  return CRYPTO_memcmp(presented.data(), expected.data(), expected.size()) == 0;
}

}  // namespace vessel::cluster
