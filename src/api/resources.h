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
#include "base/result.h"
#include "store/store.h"

namespace vessel::api {

// Ids we mint look like "sb-0123456789ab"; anything else is refused before
// it reaches the store or a path.
bool validId(std::string_view id);

struct CreateRequest {
  std::string template_name = "minimal";
  std::optional<unsigned> vcpus;
  std::optional<uint64_t> memory_mib;
  std::vector<std::string> env;  // KEY=VALUE
  boost::json::object metadata;  // string -> string
  // `network` and/or `credentials` given: the egress settings (else the node's defaults).
  std::optional<NetworkSettings> network;
  bool cold = false;  // boot the template's disk instead of restoring its snapshot
  // Seconds: idle timeout (0: never idle out) and hard lifetime; unset:
  // the deployment's defaults. Bounded by the deployment's maximum later.
  std::optional<int64_t> timeout_s, lifetime_s;
};
// An empty body means every default. Unknown fields are errors.
Result<CreateRequest> parseCreateRequest(std::string_view body);

// POST /v1/sandboxes/{id}:fork; an empty body forks once.
// {"template": NAME} instead snapshots the sandbox into a new template.
struct ForkRequest {
  int count = 1;
  std::string template_name;
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
// Whether a sandbox's stored metadata has every pair of `want`.
bool metadataMatches(const std::string& metadata_json,
                     const std::map<std::string, std::string>& want);

// Templates live in one store on the node. A tenant's own templates are
// stored under a name private to it, "t-<12 hex of sha256(tenant)>-<name>";
// every other name is built in and visible to all. A tenant names its
// templates without the prefix and can never name another tenant's.
std::string tenantTemplateName(const std::string& tenant, const std::string& name);
// The name `tenant` sees for a stored template, or nullopt when the stored
// template belongs to another tenant.
std::optional<std::string> visibleTemplateName(const std::string& tenant,
                                               const std::string& stored);
// Whether a stored name is a built-in template's.
bool builtinTemplateName(const std::string& stored);

// Milliseconds since the epoch as RFC 3339 UTC, "2026-11-30T06:40:00.123Z".
std::string rfc3339(int64_t ms);
boost::json::object sandboxJson(const store::SandboxRecord& s);
boost::json::object operationJson(const store::OperationRecord& o);

}  // namespace vessel::api
