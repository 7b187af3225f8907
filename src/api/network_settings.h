#pragma once
// A sandbox's network settings as the API takes them (api/openapi.yaml):
// parsed once at the edge, checked as the gateway will read them.
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "http/json_fields.h"
#include "ops/node.h"

namespace vessel::api {

// The lifecycle carries them as ops::NetworkSpec.
using NetworkSettings = ops::NetworkSpec;
// The API's `network` object ({"mode": ..., "allow": [...]}) and a
// `credentials` name list, validated as the gateway will read them.
Result<NetworkSettings> parseNetworkSettings(const boost::json::value& network,
                                             const boost::json::value* credentials);
// The body of PUT /v1/sandboxes/{id}/network: the `network` object's fields
// with, beside them, an optional `credentials` list (the edge of the
// network request; fuzzed).
Result<NetworkSettings> parseNetworkRequest(std::string_view body);
boost::json::object networkJson(const NetworkSettings& s);
// 1-63 of [A-Za-z0-9._-].
bool credentialName(std::string_view n);
// injectableHeader(): http/json_fields.h.

}  // namespace vessel::api
