#pragma once
// The bodies of the volume routes (docs/volumes.md), tenant bytes parsed
// at the edge into a typed request or a kInvalidArgument naming the field:
// POST /v1/volumes {"name", "size_mib"}, and :clone / :snapshot {"name"}.
#include <boost/json/value.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "volumes/mount_path.h"

namespace vessel::api {

// Whether `name` may name a volume: 1-63 of [a-z0-9._-], starting with a
// letter or digit (it sits in paths and routes: no '/', no ':').
bool validVolumeName(std::string_view name);

struct VolumeRequest {
  std::string name;
  uint64_t size_mib = 0;  // a create's; 0 for a copy
};
// With `with_size`, size_mib is required and in [min_mib, max_mib];
// without it, only "name" is accepted. Unknown fields are errors.
Result<VolumeRequest> parseVolumeRequest(std::string_view body, bool with_size, uint64_t min_mib,
                                         uint64_t max_mib);

// One entry of a sandbox create's "volumes": the tenant's volume `name`
// mounted at `path` in the guest.
struct VolumeMountRequest {
  std::string name;
  std::string path;
  bool read_only = false;
};
constexpr size_t kMaxSandboxVolumes = volumes::kMaxSandboxMounts;

// Whether `path` may be a mount point in a guest (the rule E2B's
// volumeMounts shares).
using volumes::validMountPath;

// POST /v1/sandboxes's "volumes": [{"name", "path", "read_only"?}], at most
// kMaxSandboxVolumes, no path twice nor one inside another.
Result<std::vector<VolumeMountRequest>> parseVolumeMounts(const boost::json::value& v);

}  // namespace vessel::api
