#include "e2b/volume_requests.h"

#include <boost/json.hpp>
#include <charconv>

#include "http/json_fields.h"
#include "volumes/mount_path.h"

namespace vessel::e2b {

namespace json = boost::json;

namespace {

Error bad(const std::string& what) { return Error(Code::kInvalidArgument, what); }

constexpr int64_t kMaxId = 4294967294;  // 2^32 - 1 is chown's "leave it"

Result<uint32_t> number(std::string_view text, std::string_view name, int64_t hi) {
  int64_t n = 0;
  auto [p, e] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || e != std::errc() || p != text.data() + text.size() || n < 0 || n > hi)
    return bad(std::string(name) + " must be an integer from 0 to " + std::to_string(hi));
  return static_cast<uint32_t>(n);
}

Result<bool> boolean(std::string_view text, std::string_view name) {
  if (text == "true") return true;
  if (text == "false") return false;
  return bad(std::string(name) + " must be true or false");
}

}  // namespace

bool e2bVolumeName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '_' && c != '-'))) return false;
  }
  return true;
}

bool volumeIdShape(std::string_view id) {
  if (id.size() < 5 || id.size() > 64 || !id.starts_with("vol-")) return false;
  for (char c : id.substr(4))
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

Result<std::string> parseNewVolume(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, http::parseObject(body, 2));
  std::string name;
  for (const auto& [k, v] : o) {
    if (k != "name") return bad("unknown field '" + std::string(k) + "'");
    VESSEL_ASSIGN_OR_RETURN(name, http::strField(v, "name", 63));
  }
  if (!e2bVolumeName(name))
    return bad(
        "name: 1-63 of a-z 0-9 _ -, starting with a letter or digit (E2B's names as far as "
        "Vessel's volume names allow: lower case)");
  return name;
}

Result<ContentQuery> parseContentQuery(std::string_view target, ContentRoute route) {
  const bool dir_list = route == ContentRoute::kListDir;
  const bool makes = route == ContentRoute::kMakeDir || route == ContentRoute::kWriteFile;
  VESSEL_ASSIGN_OR_RETURN(
      auto params, dir_list ? http::parseQuery(target, {"path", "depth"})
                   : makes  ? http::parseQuery(target, {"path", "uid", "gid", "mode", "force"})
                            : http::parseQuery(target, {"path"}));
  ContentQuery q;
  bool have_path = false;
  for (const auto& [k, v] : params) {
    if (k == "path") {
      if (v.empty() || v.size() > 4096) return bad("path: 1 to 4096 bytes");
      q.path = v;
      have_path = true;
    } else if (k == "depth") {
      VESSEL_ASSIGN_OR_RETURN(uint32_t d, number(v, "depth", kMaxContentDepth));
      if (d < 1) return bad("depth must be at least 1");
      q.depth = static_cast<int>(d);
    } else if (k == "uid") {
      VESSEL_ASSIGN_OR_RETURN(q.meta.uid, number(v, "uid", kMaxId));
    } else if (k == "gid") {
      VESSEL_ASSIGN_OR_RETURN(q.meta.gid, number(v, "gid", kMaxId));
    } else if (k == "mode") {
      VESSEL_ASSIGN_OR_RETURN(q.meta.mode, number(v, "mode", 07777));
    } else if (k == "force") {
      VESSEL_ASSIGN_OR_RETURN(q.force, boolean(v, "force"));
    }
  }
  if (!have_path) return bad("path is required");
  return q;
}

Result<Metadata> parseMetadataPatch(std::string_view body) {
  VESSEL_ASSIGN_OR_RETURN(json::object o, http::parseObject(body, 2));
  Metadata m;
  for (const auto& [k, v] : o) {
    std::optional<uint32_t>* field = k == "uid"    ? &m.uid
                                     : k == "gid"  ? &m.gid
                                     : k == "mode" ? &m.mode
                                                   : nullptr;
    if (!field) return bad("unknown field '" + std::string(k) + "'");
    if (v.is_null()) continue;
    const std::string_view name(k.data(), k.size());
    VESSEL_ASSIGN_OR_RETURN(int64_t n, http::intField(v, name, 0, name == "mode" ? 07777 : kMaxId));
    *field = static_cast<uint32_t>(n);
  }
  return m;
}

Result<std::vector<VolumeMount>> parseVolumeMounts(const json::value& v) {
  std::vector<VolumeMount> out;
  if (v.is_null()) return out;
  if (!v.is_array()) return bad("volumeMounts must be an array of {name, path}");
  const auto& a = v.as_array();
  if (a.size() > volumes::kMaxSandboxMounts)
    return bad("volumeMounts: at most " + std::to_string(volumes::kMaxSandboxMounts));
  for (const auto& e : a) {
    if (!e.is_object()) return bad("volumeMounts: each must be {name, path}");
    VolumeMount m;
    for (const auto& [k, f] : e.as_object()) {
      if (k == "name") {
        VESSEL_ASSIGN_OR_RETURN(m.name, http::strField(f, "volumeMounts[].name", 63));
      } else if (k == "path") {
        VESSEL_ASSIGN_OR_RETURN(m.path, http::strField(f, "volumeMounts[].path", 255));
      } else {
        return bad("volumeMounts[]: unknown field '" + std::string(k) + "'");
      }
    }
    if (!e2bVolumeName(m.name)) return bad("volumeMounts[].name: a volume's name");
    if (!volumes::validMountPath(m.path))
      return bad("volumeMounts[].path '" + m.path +
                 "': an absolute path without . or .., not / and not in /proc, /sys or /dev");
    for (const auto& o : out)
      if (volumes::mountPathsOverlap(m.path, o.path))
        return bad("volumeMounts: " + m.path + " and " + o.path + " overlap");
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace vessel::e2b
