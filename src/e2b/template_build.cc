#include "e2b/template_build.h"

#include <boost/json.hpp>

#include "base/env_var.h"
#include "http/json_fields.h"
#include "templates/image_ref.h"

namespace vessel::e2b {

namespace json = boost::json;

namespace {

// The SDK sends one step per builder call; a Dockerfile's cap is the spec's.
constexpr size_t kMaxSteps = 1000, kMaxArgs = 256, kMaxArg = 64 << 10, kMaxTags = 16;

Error bad(const std::string& what) { return Error(Code::kInvalidArgument, what); }

Result<std::vector<std::string>> strings(const json::value& v, std::string_view what, size_t max_n,
                                         size_t max_len) {
  std::vector<std::string> out;
  if (v.is_null()) return out;
  if (!v.is_array()) return bad(std::string(what) + " must be a list of strings");
  if (v.as_array().size() > max_n) return bad(std::string(what) + " has too many entries");
  for (const auto& e : v.as_array()) {
    if (!e.is_string() || e.as_string().size() > max_len)
      return bad(std::string(what) + " must hold strings of at most " + std::to_string(max_len) +
                 " bytes");
    out.emplace_back(e.as_string());
  }
  return out;
}

// "name" or "name:tag" (a "team/" prefix is the SDK's older form).
Status nameAndTag(std::string_view in, std::string& name, std::string& tag) {
  if (auto slash = in.rfind('/'); slash != std::string_view::npos) in = in.substr(slash + 1);
  tag.clear();
  if (auto colon = in.find(':'); colon != std::string_view::npos) {
    tag = std::string(in.substr(colon + 1));
    in = in.substr(0, colon);
    if (!e2bTemplateName(tag)) return bad("bad tag '" + tag.substr(0, 64) + "'");
  }
  name = std::string(in);
  if (!e2bTemplateName(name) || name.find('.') != std::string::npos)
    return bad("name must be 1 to 64 of [a-z0-9_-] (Vessel template names), not '" +
               name.substr(0, 64) + "'");
  return okStatus();
}

Result<TemplateStep> parseStep(const json::value& v, size_t i) {
  std::string at = "steps[" + std::to_string(i) + "]";
  if (!v.is_object()) return bad(at + " must be an object");
  TemplateStep s;
  std::string type;
  for (const auto& [k, x] : v.as_object()) {
    if (k == "type") {
      VESSEL_ASSIGN_OR_RETURN(type, http::strField(x, at + ".type", 16));
    } else if (k == "args") {
      VESSEL_ASSIGN_OR_RETURN(s.args, strings(x, at + ".args", kMaxArgs, kMaxArg));
    } else if (k == "filesHash") {
      if (x.is_null()) continue;
      VESSEL_ASSIGN_OR_RETURN(s.files_hash, http::strField(x, at + ".filesHash", 64));
      if (!filesHash(s.files_hash)) return bad(at + ".filesHash must be 64 hex digits");
    } else if (k == "force" || k == "forceUpload" || k == "resolveSymlinks" || k == "gzip") {
      // The SDK's own flags; `force` (this step and those after it built
      // again) is kept, the others say how the SDK uploaded.
      if (!x.is_bool() && !x.is_null())
        return bad(at + "." + std::string(k) + " must be a boolean");
      if (k == "force" && x.is_bool()) s.force = x.as_bool();
    } else {
      return bad(at + ": unknown field '" + std::string(k) + "'");
    }
  }
  auto need = [&](size_t lo, size_t hi) -> Status {
    if (s.args.size() < lo || s.args.size() > hi)
      return bad(at + " (" + type + ") takes " + std::to_string(lo) + " to " + std::to_string(hi) +
                 " args");
    return okStatus();
  };
  if (type == "COPY") {
    s.kind = TemplateStep::Kind::kCopy;
    VESSEL_TRY(need(2, 4));
    if (s.files_hash.empty()) return bad(at + " (COPY) needs filesHash");
    if (s.args[0].empty() || s.args[1].empty()) return bad(at + " (COPY) needs a source and dest");
    if (s.args.size() > 3 && !s.args[3].empty()) {
      const auto& m = s.args[3];
      bool ok = m.size() <= 4;
      for (char c : m) ok = ok && c >= '0' && c <= '7';
      if (!ok) return bad(at + " (COPY) mode must be octal, as 0755");
    }
  } else if (type == "ENV") {
    s.kind = TemplateStep::Kind::kEnv;
    if (s.args.empty() || s.args.size() % 2 != 0) return bad(at + " (ENV) takes name, value pairs");
    for (size_t j = 0; j < s.args.size(); j += 2)
      if (!portableEnvName(s.args[j]) || !envValue(s.args[j + 1]))
        return bad(at + " (ENV): bad variable name '" + s.args[j].substr(0, 64) + "'");
  } else if (type == "RUN") {
    s.kind = TemplateStep::Kind::kRun;
    VESSEL_TRY(need(1, 2));
  } else if (type == "WORKDIR") {
    s.kind = TemplateStep::Kind::kWorkdir;
    VESSEL_TRY(need(1, 1));
    if (s.args[0].empty() || s.args[0].find('\0') != std::string::npos)
      return bad(at + " (WORKDIR) needs a path");
  } else if (type == "USER") {
    s.kind = TemplateStep::Kind::kUser;
    VESSEL_TRY(need(1, 1));
  } else {
    return bad(at + ": step type '" + type.substr(0, 16) +
               "' has no mapping (COPY, ENV, RUN, WORKDIR and USER do)");
  }
  for (const auto& a : s.args)
    if (a.find('\0') != std::string::npos) return bad(at + ": an argument holds NUL");
  return s;
}

Status parseRegistry(const json::value& v, TemplateBuild& b) {
  if (v.is_null()) return okStatus();
  if (!v.is_object()) return bad("fromImageRegistry must be an object");
  const auto& o = v.as_object();
  const auto* type = o.if_contains("type");
  if (!type || !type->is_string()) return bad("fromImageRegistry.type is required");
  if (*type != "registry")
    return bad("fromImageRegistry of type '" + std::string(type->as_string()).substr(0, 16) +
               "' is not supported: use fromImage with a public image or one on a registry "
               "Vessel reaches (type 'registry')");
  for (const auto& [k, x] : o) {
    if (k == "type") continue;
    if (k != "username" && k != "password")
      return bad("fromImageRegistry: unknown field '" + std::string(k) + "'");
    VESSEL_ASSIGN_OR_RETURN(std::string value,
                            http::strField(x, "fromImageRegistry." + std::string(k), 4096));
    (k == "username" ? b.registry_auth.username : b.registry_auth.password) = std::move(value);
  }
  b.registry_credentials = true;
  return okStatus();
}

}  // namespace

bool filesHash(std::string_view h) {
  if (h.size() != 64) return false;
  for (char c : h)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool e2bTemplateName(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.'))
      return false;
  return true;
}

Result<BuildRequest> parseBuildRequest(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, http::parseObject(body));
  BuildRequest r;
  std::string name, tag;
  for (const auto& [k, v] : o) {
    if (k == "name" || k == "alias") {
      if (v.is_null()) continue;
      VESSEL_ASSIGN_OR_RETURN(name, http::strField(v, k, 128));
    } else if (k == "tags") {
      VESSEL_ASSIGN_OR_RETURN(r.tags, strings(v, "tags", kMaxTags, 64));
      for (const auto& t : r.tags)
        if (!e2bTemplateName(t)) return bad("bad tag '" + t.substr(0, 64) + "'");
    } else if (k == "cpuCount") {
      if (v.is_null()) continue;
      VESSEL_ASSIGN_OR_RETURN(auto c, http::intField(v, "cpuCount", 1, 64));
      r.cpu_count = static_cast<unsigned>(c);
    } else if (k == "memoryMB") {
      if (v.is_null()) continue;
      VESSEL_ASSIGN_OR_RETURN(auto m, http::intField(v, "memoryMB", 128, 65536));
      r.memory_mib = static_cast<uint64_t>(m);
    } else if (k == "minFreeDiskMb" || k == "teamID") {
      // Disk grows with the sandbox (disk_mib); teams are tenants here.
    } else {
      return bad("unknown field '" + std::string(k) + "'");
    }
  }
  if (name.empty()) return bad("name is required");
  VESSEL_TRY(nameAndTag(name, r.name, tag));
  if (!tag.empty()) r.tags.insert(r.tags.begin(), tag);
  return r;
}

Result<TemplateBuild> parseTemplateBuild(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, http::parseObject(body));
  TemplateBuild b;
  for (const auto& [k, v] : o) {
    if (k == "fromImage") {
      if (v.is_null()) continue;
      VESSEL_ASSIGN_OR_RETURN(auto ref, http::strField(v, "fromImage", 1024));
      auto parsed = templates::parseImageRef(ref);
      if (!parsed.ok()) return std::move(parsed).error().withContext("fromImage");
      b.from_image = parsed->canonical();
    } else if (k == "fromTemplate") {
      if (v.is_null()) continue;
      VESSEL_ASSIGN_OR_RETURN(auto t, http::strField(v, "fromTemplate", 128));
      std::string tag;
      VESSEL_TRY_CTX(nameAndTag(t, b.from_template, tag), "fromTemplate");
      if (!tag.empty() && tag != "default")
        return bad("fromTemplate: tags other than 'default' have no mapping");
    } else if (k == "fromImageRegistry") {
      VESSEL_TRY(parseRegistry(v, b));
    } else if (k == "force") {
      if (!v.is_bool() && !v.is_null()) return bad("force must be a boolean");
      b.force = v.is_bool() && v.as_bool();
    } else if (k == "steps") {
      if (v.is_null()) continue;
      if (!v.is_array()) return bad("steps must be a list");
      if (v.as_array().size() > kMaxSteps) return bad("more than 1000 steps");
      for (size_t i = 0; i < v.as_array().size(); ++i) {
        VESSEL_ASSIGN_OR_RETURN(auto s, parseStep(v.as_array()[i], i));
        b.steps.push_back(std::move(s));
      }
    } else if (k == "startCmd" || k == "readyCmd") {
      if (v.is_null()) continue;
      VESSEL_ASSIGN_OR_RETURN(auto c, http::strField(v, k, kMaxArg));
      if (c.find('\0') != std::string::npos) return bad(std::string(k) + " holds NUL");
      (k == "startCmd" ? b.start_cmd : b.ready_cmd) = std::move(c);
    } else {
      return bad("unknown field '" + std::string(k) + "'");
    }
  }
  if (b.from_image.empty() == b.from_template.empty())
    return bad("exactly one of fromImage and fromTemplate is required");
  if (b.registry_credentials && b.from_image.empty())
    return bad("fromImageRegistry needs fromImage");
  return b;
}

Result<TagsRequest> parseTagsRequest(std::string_view body, bool assign) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, http::parseObject(body));
  TagsRequest r;
  std::string named;
  const char* key = assign ? "target" : "name";
  for (const auto& [k, v] : o) {
    if (k == key) {
      VESSEL_ASSIGN_OR_RETURN(named, http::strField(v, key, 128));
    } else if (k == "tags") {
      VESSEL_ASSIGN_OR_RETURN(r.tags, strings(v, "tags", kMaxTags, 64));
    } else {
      return bad("unknown field '" + std::string(k) + "'");
    }
  }
  if (named.empty()) return bad(std::string(key) + " is required");
  VESSEL_TRY(nameAndTag(named, r.name, r.tag));
  if (r.tag.empty()) r.tag = "default";
  if (r.tags.empty()) return bad("tags must name at least one tag");
  for (const auto& t : r.tags)
    if (!e2bTemplateName(t)) return bad("bad tag '" + t.substr(0, 64) + "'");
  return r;
}

std::string shellQuote(std::string_view s, bool glob) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else if (glob && (c == '*' || c == '?')) {
      out += '\'';
      out += c;
      out += '\'';
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace vessel::e2b
