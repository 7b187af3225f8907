#pragma once
// E2B's Volume API at the edge (../shared/specs/e2b/openapi.yml `/volumes`,
// openapi-volumecontent.yml `/volumecontent/{volumeID}/...`): bodies and
// query strings parsed once, bounded, into typed requests, or a
// kInvalidArgument the API answers 400. docs/e2b.md, "Volumes".
#include <boost/json/fwd.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace vessel::e2b {

// Whether `name` may name a volume through E2B: E2B's ^[a-zA-Z0-9_-]+$ as
// far as a Vessel volume name allows it (lower case, 1-63, starting with a
// letter or digit), since the volume is one of Vessel's volumes too.
bool e2bVolumeName(std::string_view name);

// Whether `id` can be a volume's id (Vessel's "vol-<hex>"): anything else
// is a volume that does not exist, refused before any lookup.
bool volumeIdShape(std::string_view id);

// POST /volumes: {"name"}; the name.
Result<std::string> parseNewVolume(std::string_view body);

// A file's or directory's owner and mode as E2B gives them (uid, gid:
// 0 to 4294967294; mode: permission bits, at most 07777); unset: left.
struct Metadata {
  std::optional<uint32_t> uid, gid, mode;
};

// The query of a /volumecontent route. Which parameters a route takes:
//   GET dir: path, depth; POST dir and PUT file: path, uid, gid, mode,
//   force; GET/PATCH/DELETE path and GET file: path.
enum class ContentRoute { kPath, kListDir, kMakeDir, kFile, kWriteFile };
struct ContentQuery {
  std::string path;  // required, non-empty (the volume's own path rules apply later)
  int depth = 1;     // 1 to kMaxContentDepth
  Metadata meta;
  bool force = false;
};
constexpr int kMaxContentDepth = 64;
// `target` is the request target with its query string.
Result<ContentQuery> parseContentQuery(std::string_view target, ContentRoute route);

// PATCH /volumecontent/{id}/path: {"uid"?, "gid"?, "mode"?} (null: unset).
Result<Metadata> parseMetadataPatch(std::string_view body);

// One of POST /sandboxes's `volumeMounts`: the tenant's volume `name` at
// `path` in the guest.
struct VolumeMount {
  std::string name, path;
};
// `volumeMounts`: [{name, path}], at most 16, each path a valid mount
// point (volumes/mount_path.h) overlapping no other; null or [] is none.
Result<std::vector<VolumeMount>> parseVolumeMounts(const boost::json::value& v);

}  // namespace vessel::e2b
