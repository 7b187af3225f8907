#include "templates/manifest.h"

#include <boost/json.hpp>

#include "base/env_var.h"

namespace vessel::templates {

namespace json = boost::json;

std::string toJson(const Manifest& m) {
  json::object files;
  for (const auto& [k, v] : m.files) files[k] = v;
  json::object o;
  o["format"] = m.format;
  o["name"] = m.name;
  o["version"] = m.version;
  o["spec_hash"] = m.spec_hash;
  o["qemu_version"] = m.qemu_version;
  o["kernel_sha256"] = m.kernel_sha256;
  o["cmdline"] = m.cmdline;
  o["vcpus"] = m.vcpus;
  o["memory_mib"] = m.memory_mib;
  o["network"] = m.network;
  if (m.disk_mib) o["disk_mib"] = m.disk_mib;
  if (!m.env.empty()) {
    json::array env;
    for (const auto& e : m.env) env.push_back(json::string(e));
    o["env"] = std::move(env);
  }
  if (m.start_pid) o["start_pid"] = m.start_pid;
  o["created_at"] = m.created_at;
  o["files"] = std::move(files);
  return json::serialize(o);
}

namespace {

Result<std::string> str(const json::object& o, const char* k, size_t max = 512) {
  const json::value* v = o.if_contains(k);
  if (!v || !v->is_string())
    return Error(Code::kInvalidArgument, std::string("manifest: ") + k + " missing");
  if (v->get_string().size() > max)
    return Error(Code::kInvalidArgument, std::string("manifest: ") + k + " too long");
  return std::string(v->get_string());
}

Result<uint64_t> num(const json::object& o, const char* k) {
  const json::value* v = o.if_contains(k);
  if (v && v->is_uint64()) return v->get_uint64();
  if (v && v->is_int64() && v->get_int64() >= 0) return static_cast<uint64_t>(v->get_int64());
  return Error(Code::kInvalidArgument, std::string("manifest: ") + k + " missing or not a count");
}

}  // namespace

Result<Manifest> parseManifest(std::string_view text) {
  if (text.size() > 64 * 1024) return Error(Code::kInvalidArgument, "manifest: larger than 64 KiB");
  boost::system::error_code ec;
  json::parse_options opt;
  opt.max_depth = 8;
  json::value v = json::parse(text, ec, {}, opt);
  if (ec) return Error(Code::kInvalidArgument, "manifest: invalid JSON: " + ec.message());
  const json::object* o = v.if_object();
  if (!o) return Error(Code::kInvalidArgument, "manifest: not an object");
  Manifest m;
  VESSEL_ASSIGN_OR_RETURN(uint64_t format, num(*o, "format"));
  if (format != kManifestFormat)
    return Error(Code::kFailedPrecondition,
                 "manifest: format " + std::to_string(format) + " is not supported");
  VESSEL_ASSIGN_OR_RETURN(m.name, str(*o, "name", 64));
  VESSEL_ASSIGN_OR_RETURN(m.version, str(*o, "version", 64));
  VESSEL_ASSIGN_OR_RETURN(m.spec_hash, str(*o, "spec_hash", 64));
  VESSEL_ASSIGN_OR_RETURN(m.qemu_version, str(*o, "qemu_version"));
  VESSEL_ASSIGN_OR_RETURN(m.kernel_sha256, str(*o, "kernel_sha256", 64));
  VESSEL_ASSIGN_OR_RETURN(m.cmdline, str(*o, "cmdline", 4096));
  VESSEL_ASSIGN_OR_RETURN(m.created_at, str(*o, "created_at", 64));
  VESSEL_ASSIGN_OR_RETURN(uint64_t vcpus, num(*o, "vcpus"));
  VESSEL_ASSIGN_OR_RETURN(m.memory_mib, num(*o, "memory_mib"));
  if (vcpus == 0 || vcpus > 64 || m.memory_mib == 0 || m.memory_mib > (1 << 20))
    return Error(Code::kInvalidArgument, "manifest: machine shape out of range");
  m.vcpus = static_cast<unsigned>(vcpus);
  if (const json::value* n = o->if_contains("network")) {
    if (!n->is_bool()) return Error(Code::kInvalidArgument, "manifest: network must be a boolean");
    m.network = n->get_bool();
  }
  if (o->contains("disk_mib")) {
    VESSEL_ASSIGN_OR_RETURN(m.disk_mib, num(*o, "disk_mib"));
    if (m.disk_mib > (uint64_t{1} << 24))
      return Error(Code::kInvalidArgument, "manifest: disk_mib out of range");
  }
  if (const json::value* e = o->if_contains("env")) {
    if (!e->is_array() || e->get_array().size() > kMaxManifestEnv)
      return Error(Code::kInvalidArgument, "manifest: env must be a list of KEY=VALUE");
    size_t bytes = 0;
    for (const auto& kv : e->get_array()) {
      if (!kv.is_string() || !envEntry(kv.get_string()) ||
          (bytes += kv.get_string().size()) > kMaxManifestEnvBytes)
        return Error(Code::kInvalidArgument, "manifest: env must be a list of KEY=VALUE");
      m.env.emplace_back(kv.get_string());
    }
  }
  if (o->contains("start_pid")) {
    VESSEL_ASSIGN_OR_RETURN(uint64_t pid, num(*o, "start_pid"));
    // Linux's largest pid (PID_MAX_LIMIT); 1 is the agent itself.
    if (pid < 2 || pid > (uint64_t{1} << 22))
      return Error(Code::kInvalidArgument, "manifest: start_pid out of range");
    m.start_pid = static_cast<uint32_t>(pid);
  }
  const json::value* f = o->if_contains("files");
  if (!f || !f->is_object()) return Error(Code::kInvalidArgument, "manifest: files missing");
  if (f->get_object().size() > 16) return Error(Code::kInvalidArgument, "manifest: too many files");
  for (const auto& kv : f->get_object()) {
    std::string name(kv.key());
    if (name.empty() || name.size() > 64 || name.find('/') != std::string::npos || name[0] == '.')
      return Error(Code::kInvalidArgument, "manifest: bad file name");
    if (!kv.value().is_string() || kv.value().get_string().size() != 64)
      return Error(Code::kInvalidArgument, "manifest: bad sha256 for " + name);
    m.files[name] = std::string(kv.value().get_string());
  }
  for (const char* need : {kRootfsFile, kMemoryFile, kStateFile})
    if (!m.files.count(need))
      return Error(Code::kInvalidArgument, std::string("manifest: no checksum for ") + need);
  return m;
}

}  // namespace vessel::templates
