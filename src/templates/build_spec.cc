#include "templates/build_spec.h"

#include <boost/json.hpp>
#include <cctype>

#include "base/base64.h"
#include "base/env_var.h"
#include "templates/image_ref.h"

namespace vessel::templates {

namespace json = boost::json;

namespace {

Error specError(const std::string& msg) {
  return Error(Code::kInvalidArgument, "build spec: " + msg);
}

bool noNul(std::string_view s) { return s.find('\0') == std::string_view::npos; }

// A user as the agent and the builder look one up: name or id, and
// optionally :group.
bool ownerName(std::string_view u) {
  if (u.size() > 65) return false;
  size_t colons = 0;
  for (char c : u) {
    if (c == ':' && ++colons == 1) continue;
    if (!isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  }
  return u.empty() || (u.front() != ':' && u.back() != ':');
}

bool guestPath(std::string_view p) {
  return !p.empty() && p[0] == '/' && p.size() <= 4096 && noNul(p);
}

// `argv`: a command line, whose first word names the program (its other
// words may be empty).
Result<std::vector<std::string>> stringList(const json::value& v, const char* what, bool argv) {
  if (!v.is_array()) return specError(std::string(what) + " must be a list of strings");
  std::vector<std::string> out;
  for (const auto& e : v.get_array()) {
    if (!e.is_string() || !noNul(e.get_string()))
      return specError(std::string(what) + " holds something other than a string without NUL");
    out.emplace_back(e.get_string());
  }
  if (argv && (out.empty() || out[0].empty()))
    return specError(std::string(what) + " must name a program first");
  return out;
}

// Long because it is the one reader of a step: each kind's fields checked
// together, so a step cannot mix two kinds.
Result<BuildStep> parseStep(const json::value& v, size_t i, size_t max_bytes) {
  std::string at = "steps[" + std::to_string(i) + "]";
  if (!v.is_object()) return specError(at + " must be an object");
  const auto& o = v.get_object();
  BuildStep st;
  int kinds = 0;
  for (const auto& kv : o) {
    static const char* known[] = {"line",  "text",  "run",    "user",           "workdir", "env",
                                  "write", "mkdir", "unpack", "content_base64", "mode",    "owner"};
    bool ok = false;
    for (const char* k : known) ok |= kv.key() == k;
    if (!ok) return specError(at + ": unknown field '" + std::string(kv.key()).substr(0, 64) + "'");
  }
  if (const auto* x = o.if_contains("line")) {
    if (!x->is_int64() || x->get_int64() < 0 || x->get_int64() > 10000000)
      return specError(at + ".line must be a line number");
    st.line = static_cast<unsigned>(x->get_int64());
  }
  if (const auto* x = o.if_contains("text")) {
    if (!x->is_string() || x->get_string().size() > 4096)
      return specError(at + ".text must be a string of at most 4096 bytes");
    st.text = std::string(x->get_string());
  }
  auto path = [&](const char* k, BuildStep::Kind kind) -> Status {
    if (const auto* x = o.if_contains(k)) {
      ++kinds;
      st.kind = kind;
      if (!x->is_string() || !guestPath(x->get_string()))
        return specError(at + "." + k + " must be an absolute guest path");
      st.path = std::string(x->get_string());
    }
    return okStatus();
  };
  VESSEL_TRY(path("write", BuildStep::Kind::kWrite));
  VESSEL_TRY(path("mkdir", BuildStep::Kind::kMkdir));
  VESSEL_TRY(path("unpack", BuildStep::Kind::kUnpack));
  if (const auto* x = o.if_contains("run")) {
    ++kinds;
    st.kind = BuildStep::Kind::kRun;
    VESSEL_ASSIGN_OR_RETURN(st.argv, stringList(*x, (at + ".run").c_str(), true));
  }
  if (kinds != 1) return specError(at + " must hold exactly one of run, write, mkdir, unpack");
  bool run = st.kind == BuildStep::Kind::kRun;
  bool data = st.kind == BuildStep::Kind::kWrite || st.kind == BuildStep::Kind::kUnpack;
  auto only = [&](const char* k, bool allowed) -> Status {
    if (!allowed && o.contains(k))
      return specError(at + ": " + k + " does not belong to this step");
    return okStatus();
  };
  VESSEL_TRY(only("user", run));
  VESSEL_TRY(only("workdir", run));
  VESSEL_TRY(only("env", run));
  VESSEL_TRY(only("content_base64", data));
  VESSEL_TRY(only("mode", !run && st.kind != BuildStep::Kind::kUnpack));
  VESSEL_TRY(only("owner", !run && st.kind != BuildStep::Kind::kUnpack));
  if (const auto* x = o.if_contains("user")) {
    if (!x->is_string() || x->get_string().empty() || !ownerName(x->get_string()))
      return specError(at + ".user must be user[:group]");
    st.user = std::string(x->get_string());
  }
  if (const auto* x = o.if_contains("workdir")) {
    if (!x->is_string() || !guestPath(x->get_string()))
      return specError(at + ".workdir must be an absolute guest path");
    st.workdir = std::string(x->get_string());
  }
  if (const auto* x = o.if_contains("env")) {
    VESSEL_ASSIGN_OR_RETURN(st.env, stringList(*x, (at + ".env").c_str(), false));
    for (const auto& e : st.env)
      if (!envEntry(e)) return specError(at + ".env holds an entry that is not NAME=VALUE");
  }
  if (const auto* x = o.if_contains("content_base64")) {
    if (!x->is_string()) return specError(at + ".content_base64 must be a string");
    auto c = base64Decode(x->get_string(), max_bytes);
    if (!c.ok()) return specError(at + ".content_base64: " + c.error().message());
    st.content = std::move(*c);
  }
  st.mode = st.kind == BuildStep::Kind::kMkdir ? 0755 : 0644;
  if (const auto* x = o.if_contains("mode")) {
    if (!x->is_int64() || x->get_int64() < 0 || x->get_int64() > 07777)
      return specError(at + ".mode must be 0 to 07777");
    st.mode = static_cast<uint32_t>(x->get_int64());
  }
  if (const auto* x = o.if_contains("owner")) {
    if (!x->is_string() || !ownerName(x->get_string()))
      return specError(at + ".owner must be user[:group]");
    st.owner = std::string(x->get_string());
  }
  return st;
}

json::object stepJson(const BuildStep& st) {
  json::object o;
  if (st.line) o["line"] = st.line;
  if (!st.text.empty()) o["text"] = st.text;
  switch (st.kind) {
    case BuildStep::Kind::kRun: {
      json::array a;
      for (const auto& w : st.argv) a.push_back(json::string(w));
      o["run"] = std::move(a);
      o["user"] = st.user;
      if (!st.workdir.empty()) o["workdir"] = st.workdir;
      json::array env;
      for (const auto& e : st.env) env.push_back(json::string(e));
      o["env"] = std::move(env);
      break;
    }
    case BuildStep::Kind::kWrite:
      o["write"] = st.path;
      o["content_base64"] = base64Encode(st.content);
      o["mode"] = st.mode;
      o["owner"] = st.owner;
      break;
    case BuildStep::Kind::kMkdir:
      o["mkdir"] = st.path;
      o["mode"] = st.mode;
      o["owner"] = st.owner;
      break;
    case BuildStep::Kind::kUnpack:
      o["unpack"] = st.path;
      o["content_base64"] = base64Encode(st.content);
      break;
  }
  return o;
}

// The fields only Dockerfile builds set, added to canonicalSpec and
// specJson only when present: older specs keep their versions.
void dockerFields(const BuildSpec& s, json::object& o) {
  if (!s.start_argv.empty()) {
    json::array a;
    for (const auto& w : s.start_argv) a.push_back(json::string(w));
    o["start"] = std::move(a);
  }
  if (!s.start_user.empty()) o["start_user"] = s.start_user;
  if (!s.start_cwd.empty()) o["start_cwd"] = s.start_cwd;
  if (!s.steps.empty()) {
    json::array a;
    for (const auto& st : s.steps) a.push_back(stepJson(st));
    o["steps"] = std::move(a);
  }
}

}  // namespace

// Long because it is the one reader of a build spec: every field checked
// in one place, in the order docs/templates.md lists them.
Result<BuildSpec> parseBuildSpec(std::string_view body, size_t max_bytes) {
  if (body.size() > max_bytes)
    return Error(Code::kInvalidArgument,
                 "build spec larger than " + std::to_string(max_bytes >> 20) + " MiB");
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
    static const char* known[] = {"name",
                                  "base",
                                  "from_image",
                                  "image_cmd",
                                  "files",
                                  "commands",
                                  "env",
                                  "start",
                                  "ready",
                                  "vcpus",
                                  "memory_mib",
                                  "disk_mib",
                                  "start_user",
                                  "start_cwd",
                                  "steps",
                                  "no_cache",
                                  "from_image_credential"};
    bool ok = false;
    for (const char* k : known) ok |= kv.key() == k;
    if (!ok)
      return Error(Code::kInvalidArgument,
                   "build spec: unknown field '" + std::string(kv.key()) + "'");
  }
  VESSEL_TRY(str("name", s.name));
  VESSEL_TRY(str("base", s.base));
  if (const auto* x = o.if_contains("start"); x && x->is_array()) {
    VESSEL_ASSIGN_OR_RETURN(s.start_argv, stringList(*x, "start", true));
  } else {
    VESSEL_TRY(str("start", s.start));
  }
  VESSEL_TRY(str("start_user", s.start_user));
  VESSEL_TRY(str("start_cwd", s.start_cwd));
  if (!ownerName(s.start_user)) return specError("start_user must be user[:group]");
  if (!s.start_cwd.empty() && !guestPath(s.start_cwd))
    return specError("start_cwd must be an absolute guest path");
  if (const auto* x = o.if_contains("steps")) {
    if (!x->is_array()) return specError("steps must be a list");
    if (x->get_array().size() > kMaxBuildSteps)
      return specError("more than " + std::to_string(kMaxBuildSteps) + " steps");
    for (size_t i = 0; i < x->get_array().size(); ++i) {
      VESSEL_ASSIGN_OR_RETURN(BuildStep st, parseStep(x->get_array()[i], i, max_bytes));
      s.steps.push_back(std::move(st));
    }
  }
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
  VESSEL_TRY(str("from_image_credential", s.from_image_credential));
  if (!s.from_image_credential.empty()) {
    if (s.from_image.empty()) return specError("from_image_credential needs from_image");
    if (s.from_image_credential.size() > 63 ||
        s.from_image_credential.find_first_not_of(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
            std::string::npos)
      return specError(
          "from_image_credential must be a credential's name (1-63 of [A-Za-z0-9._-])");
  }
  if (const auto* x = o.if_contains("no_cache")) {
    if (!x->is_bool()) return specError("no_cache must be a boolean");
    s.no_cache = x->get_bool();
  }
  if (const auto* x = o.if_contains("image_cmd")) {
    if (!x->is_bool())
      return Error(Code::kInvalidArgument, "build spec: image_cmd must be a boolean");
    s.image_cmd = x->get_bool();
    if (s.image_cmd && s.from_image.empty())
      return Error(Code::kInvalidArgument, "build spec: image_cmd needs from_image");
    if (s.image_cmd && (!s.start.empty() || !s.start_argv.empty()))
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
  if (!s.from_image_credential.empty()) o["from_image_credential"] = s.from_image_credential;
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
  dockerFields(s, o);
  return json::serialize(o);  // std::map and fixed insertion order: stable
}

std::string specJson(const BuildSpec& s) {
  json::object o;
  o["name"] = s.name;
  if (s.from_image.empty())
    o["base"] = s.base;
  else
    o["from_image"] = s.from_image;
  if (!s.from_image_credential.empty()) o["from_image_credential"] = s.from_image_credential;
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
  if (s.no_cache) o["no_cache"] = true;
  dockerFields(s, o);
  return json::serialize(o);
}

}  // namespace vessel::templates
