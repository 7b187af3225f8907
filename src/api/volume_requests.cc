#include "api/volume_requests.h"

#include "http/json_fields.h"

namespace vessel::api {

bool validVolumeName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return false;
  }
  return true;
}

Result<VolumeRequest> parseVolumeRequest(std::string_view body, bool with_size, uint64_t min_mib,
                                         uint64_t max_mib) {
  VESSEL_ASSIGN_OR_RETURN(auto o, http::parseObject(body, 2));
  VolumeRequest out;
  bool sized = false;
  for (const auto& [k, v] : o) {
    if (k == "name") {
      VESSEL_ASSIGN_OR_RETURN(out.name, http::strField(v, "name", 63));
    } else if (k == "size_mib" && with_size) {
      VESSEL_ASSIGN_OR_RETURN(auto n, http::intField(v, "size_mib", static_cast<int64_t>(min_mib),
                                                     static_cast<int64_t>(max_mib)));
      out.size_mib = static_cast<uint64_t>(n);
      sized = true;
    } else {
      return http::badRequest("unknown field: " + std::string(k));
    }
  }
  if (!validVolumeName(out.name))
    return http::badRequest(
        "name: 1-63 of [a-z0-9._-], starting with a letter or digit (the volume's name)");
  if (with_size && !sized) return http::badRequest("size_mib is required");
  return out;
}

Result<std::vector<VolumeMountRequest>> parseVolumeMounts(const boost::json::value& v) {
  if (!v.is_array()) return http::badRequest("volumes must be an array of {name, path, read_only}");
  const auto& a = v.as_array();
  if (a.size() > kMaxSandboxVolumes)
    return http::badRequest("volumes: at most " + std::to_string(kMaxSandboxVolumes));
  std::vector<VolumeMountRequest> out;
  for (const auto& e : a) {
    if (!e.is_object()) return http::badRequest("volumes: each must be {name, path, read_only}");
    VolumeMountRequest m;
    bool named = false, placed = false;
    for (const auto& [k, f] : e.as_object()) {
      if (k == "name") {
        VESSEL_ASSIGN_OR_RETURN(m.name, http::strField(f, "volumes[].name", 63));
        named = true;
      } else if (k == "path") {
        VESSEL_ASSIGN_OR_RETURN(m.path, http::strField(f, "volumes[].path", 255));
        placed = true;
      } else if (k == "read_only") {
        if (!f.is_bool()) return http::badRequest("volumes[].read_only must be a boolean");
        m.read_only = f.as_bool();
      } else {
        return http::badRequest("volumes[]: unknown field '" + std::string(k) + "'");
      }
    }
    if (!named || !validVolumeName(m.name))
      return http::badRequest("volumes[].name: a volume's name (1-63 of [a-z0-9._-])");
    if (!placed || !validMountPath(m.path))
      return http::badRequest("volumes[].path '" + m.path +
                              "': an absolute path without . or .., not / and not in /proc, "
                              "/sys or /dev");
    for (const auto& o : out)
      if (volumes::mountPathsOverlap(m.path, o.path))
        return http::badRequest("volumes: " + m.path + " and " + o.path + " overlap");
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace vessel::api
