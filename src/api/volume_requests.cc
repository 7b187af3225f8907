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

}  // namespace vessel::api
