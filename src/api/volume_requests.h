#pragma once
// The bodies of the volume routes (docs/volumes.md), tenant bytes parsed
// at the edge into a typed request or a kInvalidArgument naming the field:
// POST /v1/volumes {"name", "size_mib"}, and :clone / :snapshot {"name"}.
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

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

}  // namespace vessel::api
