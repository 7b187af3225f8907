#include "templates/build_spec.h"

#include <boost/json.hpp>
#include <cctype>

#include "base/env_var.h"
#include "templates/image_ref.h"

namespace vessel::templates {

namespace json = boost::json;

// Long because it is the one reader of a build spec: every field checked
// in one place, in the order docs/templates.md lists them.
Result<BuildSpec> parseBuildSpec(std::string_view body) {
  if (body.size() > (1 << 20)) return Error(Code::kInvalidArgument, "build spec larger than 1 MiB");
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) return Error(Code::kInvalidArgument, "build spec: not a JSON object");
  const auto& o = v.as_object();
  BuildSpec s;
  auto str = [&](const char* k, std::string& out) -> Status {
    if (const auto* x = o.if_contains(k)) {
      if (!x->is_string())
        return Error(Code::kInvalidArgument, std::string("build spec: ") + k + " must be a string");
      out = std::string(x->get_string());
    }
    return okStatus();
  };
  auto strs = [&](const char* k, std::vector<std::string>& out) -> Status {
    if (const auto* x = o.if_contains(k)) {
      if (!x->is_array())
        return Error(Code::kInvalidArgument, std::string("build spec: ") + k + " must be a list");
      for (const auto& e : x->get_array()) {
        if (!e.is_string())
          return Error(Code::kInvalidArgument,
                       std::string("build spec: ") + k + " holds a non-string");
        out.emplace_back(e.get_string());
      }
    }
    return okStatus();
  };
  for (const auto& kv : o) {
    static const char* known[] = {"name",  "base",     "from_image", "image_cmd",
                                  "files", "commands", "env",        "start",
                                  "ready", "vcpus",    "memory_mib", "disk_mib"};
    bool ok = false;
    for (const char* k : known) ok |= kv.key() == k;
    if (!ok)
      return Error(Code::kInvalidArgument,
                   "build spec: unknown field '" + std::string(kv.key()) + "'");
  }
  VESSEL_TRY(str("name", s.name));
  VESSEL_TRY(str("base", s.base));
  VESSEL_TRY(str("start", s.start));
  VESSEL_TRY(str("ready", s.ready));
  VESSEL_TRY(strs("commands", s.commands));
  if (o.contains("from_image")) {
    std::string ref;
    VESSEL_TRY(str("from_image", ref));
    if (o.contains("base"))
      return Error(Code::kInvalidArgument, "build spec: base and from_image exclude each other");
    auto r = parseImageRef(ref);
    if (!r.ok()) return std::move(r).error().withContext("build spec: from_image");
    s.from_image = r->canonical();
  }
  if (const auto* x = o.if_contains("image_cmd")) {
    if (!x->is_bool())
      return Error(Code::kInvalidArgument, "build spec: image_cmd must be a boolean");
    s.image_cmd = x->get_bool();
    if (s.image_cmd && s.from_image.empty())
      return Error(Code::kInvalidArgument, "build spec: image_cmd needs from_image");
    if (s.image_cmd && !s.start.empty())
      return Error(Code::kInvalidArgument, "build spec: start and image_cmd exclude each other");
  }
  if (const auto* e = o.if_contains("env")) {
    if (!e->is_object()) return Error(Code::kInvalidArgument, "build spec: env must be an object");
    for (const auto& kv : e->get_object()) {
      if (!portableEnvName(kv.key()))
        return Error(Code::kInvalidArgument, "build spec: env: bad variable name '" +
                                                 std::string(kv.key()).substr(0, 64) +
                                                 "' (letters, digits and _, not first a digit)");
      if (!kv.value().is_string() || !envValue(kv.value().get_string()))
        return Error(Code::kInvalidArgument, "build spec: env values must be strings without NUL");
      s.env.push_back(std::string(kv.key()) + "=" + std::string(kv.value().get_string()));
    }
  }
  if (const auto* f = o.if_contains("files")) {
    if (!f->is_object())
      return Error(Code::kInvalidArgument, "build spec: files must be an object");
    for (const auto& kv : f->get_object()) {
      if (kv.key().empty() || kv.key()[0] != '/' || !kv.value().is_string())
        return Error(Code::kInvalidArgument, "build spec: files maps absolute paths to strings");
      s.files[std::string(kv.key())] = std::string(kv.value().get_string());
    }
  }
  if (const auto* x = o.if_contains("vcpus")) {
    if (!x->is_int64() || x->get_int64() < 1 || x->get_int64() > 64)
      return Error(Code::kInvalidArgument, "build spec: vcpus must be 1 to 64");
    s.vcpus = static_cast<unsigned>(x->get_int64());
  }
  if (const auto* x = o.if_contains("memory_mib")) {
    if (!x->is_int64() || x->get_int64() < 64 || x->get_int64() > 65536)
      return Error(Code::kInvalidArgument, "build spec: memory_mib must be 64 to 65536");
    s.memory_mib = static_cast<uint64_t>(x->get_int64());
  }
  if (const auto* x = o.if_contains("disk_mib")) {
    if (!x->is_int64() || x->get_int64() < 64 || x->get_int64() > (int64_t{1} << 24))
      return Error(Code::kInvalidArgument, "build spec: disk_mib must be 64 to 16777216");
    s.disk_mib = static_cast<uint64_t>(x->get_int64());
  }
  if (s.name.empty() || s.name.size() > 64)
    return Error(Code::kInvalidArgument, "build spec: name is required (at most 64 characters)");
  for (char c : s.name)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
      return Error(Code::kInvalidArgument, "build spec: name may hold letters, digits, - and _");
  return s;
}

std::string canonicalSpec(const BuildSpec& s) {
  json::object o;
  o["name"] = s.name;
  o["base"] = s.base;
  // Only when set: specs without an image keep the versions they had.
  if (!s.from_image.empty()) o["from_image"] = s.from_image;
  if (s.image_cmd) o["image_cmd"] = true;
  json::object files;
  for (const auto& [k, v] : s.files) files[k] = v;
  o["files"] = std::move(files);
  json::array cmds, env;
  for (const auto& c : s.commands) cmds.push_back(json::string(c));
  for (const auto& e : s.env) env.push_back(json::string(e));
  o["commands"] = std::move(cmds);
  o["env"] = std::move(env);
  o["start"] = s.start;
  o["ready"] = s.ready;
  o["vcpus"] = s.vcpus;
  o["memory_mib"] = s.memory_mib;
  if (s.disk_mib) o["disk_mib"] = s.disk_mib;
  return json::serialize(o);  // std::map and fixed insertion order: stable
}

std::string specJson(const BuildSpec& s) {
  json::object o;
  o["name"] = s.name;
  if (s.from_image.empty())
    o["base"] = s.base;
  else
    o["from_image"] = s.from_image;
  if (s.image_cmd) o["image_cmd"] = true;
  json::object files, env;
  for (const auto& [k, v] : s.files) files[k] = v;
  for (const auto& e : s.env) {
    auto eq = e.find('=');
    env[e.substr(0, eq)] = eq == std::string::npos ? "" : e.substr(eq + 1);
  }
  json::array cmds;
  for (const auto& c : s.commands) cmds.push_back(json::string(c));
  o["files"] = std::move(files);
  o["commands"] = std::move(cmds);
  o["env"] = std::move(env);
  o["start"] = s.start;
  o["ready"] = s.ready;
  o["vcpus"] = s.vcpus;
  o["memory_mib"] = s.memory_mib;
  if (s.disk_mib) o["disk_mib"] = s.disk_mib;
  return json::serialize(o);
}

}  // namespace vessel::templates
