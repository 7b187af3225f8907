#pragma once
// The JSON of sandboxes and operations as the API shows them
// (api/openapi.yaml): also the payload of the stored events SSE clients
// read, so the lifecycle's events and the API's replies never disagree.
#include <boost/json/object.hpp>
#include <cstdint>
#include <string>

#include "store/store.h"
#include "templates/manifest.h"

namespace vessel::ops {

// Milliseconds since the epoch as RFC 3339 UTC, "2026-11-30T06:40:00.123Z".
std::string rfc3339(int64_t ms);
boost::json::object sandboxJson(const store::SandboxRecord& s);
boost::json::object operationJson(const store::OperationRecord& o);
// A template as the tenant names it.
boost::json::object templateJson(const templates::Manifest& m, const std::string& name,
                                 bool builtin);

}  // namespace vessel::ops
