#pragma once
// The API's resources at the edge: request bodies and queries parsed once
// into typed structs (or an InvalidArgument error naming the field), and
// store records rendered as the JSON of api/openapi.yaml.
#include <boost/json/object.hpp>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/network_settings.h"
#include "api/volume_requests.h"
#include "base/result.h"
#include "ops/events.h"
#include "ops/lifecycle.h"
#include "store/store.h"
#include "templates/naming.h"

namespace vessel::api {

// Ids we mint look like "sb-0123456789ab"; anything else is refused before
// it reaches the store or a path.
bool validId(std::string_view id);

struct CreateRequest {
  std::string template_name = "minimal";
  std::optional<unsigned> vcpus;
  std::optional<uint64_t> memory_mib;
  std::optional<uint64_t> disk_mib;  // bounded by the template and the deployment later
  std::vector<std::string> env;      // KEY=VALUE
  boost::json::object metadata;      // string -> string
  // `network` and/or `credentials` given: the egress settings (else the node's defaults).
  std::optional<NetworkSettings> network;
  bool cold = false;  // boot the template's disk instead of restoring its snapshot
  // Seconds: idle timeout (0: never idle out) and hard lifetime; unset:
  // the deployment's defaults. Bounded by the deployment's maximum later.
  std::optional<int64_t> timeout_s, lifetime_s;
  // "on_timeout": "delete" (default) or "pause"; "pause_memory": false for
  // a disk-only pause; "auto_resume": traffic resumes a paused one
  // (ops::CreateRequest says which combinations hold).
  bool pause_on_timeout = false;
  bool pause_memory = true;
  bool auto_resume = false;
  // Volumes mounted once the sandbox runs (docs/volumes.md).
  std::vector<VolumeMountRequest> volumes;
};
// An empty body means every default. Unknown fields are errors.
Result<CreateRequest> parseCreateRequest(std::string_view body);

// POST /v1/sandboxes/{id}:pause: {"memory"?: bool}; empty: true. Whether
// to keep memory (false: only the disk; its resume boots it again).
Result<bool> parsePauseRequest(std::string_view body);

// POST /v1/sandboxes/{id}:fork; an empty body forks once.
// {"template": NAME} instead snapshots the sandbox into a new template.
struct ForkRequest {
  int count = 1;
  std::string template_name;
  // "volumes": "share" (the default: copies mount their parent's volumes)
  // or "clone" (each copy mounts a copy-on-fork clone of each).
  bool clone_volumes = false;
};
Result<ForkRequest> parseForkRequest(std::string_view body);

// POST /v1/sandboxes/{id}:extend: a new idle timeout and/or lifetime
// (counted from now); at least one.
struct ExtendRequest {
  std::optional<int64_t> timeout_s, lifetime_s;
};
Result<ExtendRequest> parseExtendRequest(std::string_view body);

// GET /v1/sandboxes?page_size=N&page_token=ID&metadata.KEY=VALUE...: every
// metadata pair given must match.
struct ListQuery {
  int page_size = 50;
  std::string page_token;  // the last id of the previous page
  std::map<std::string, std::string> metadata;
};
Result<ListQuery> parseListQuery(std::string_view target);

// GET /v1/sandboxes/{id}/logs?kind=K&since=T&after=SEQ&limit=N&follow=true
// (docs/logs.md): since an RFC 3339 time, after a sequence number (an
// entry's seq: the next page, or where a follow resumes).
struct LogsQuery {
  store::LogQuery q;
  bool follow = false;
};
Result<LogsQuery> parseLogsQuery(std::string_view target);
using ops::logMessage;
using ops::metadataMatches;
using ops::operationJson;
using ops::rfc3339;
using ops::sandboxJson;
using templates::builtinTemplateName;
using templates::tenantTemplateName;
using templates::visibleTemplateName;

}  // namespace vessel::api
