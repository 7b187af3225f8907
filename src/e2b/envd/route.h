#pragma once
// Which sandbox an envd request is for, from its head alone, found the way
// Envd finds it: the `E2b-Sandbox-Id` header, else a `49983-<id>.<domain>`
// Host, else (a signed /files URL, which may name no sandbox) the live
// sandbox whose access token made the signature. An API replica's envd
// listener uses it to forward each request to the node running its sandbox
// (docs/design.md, "Many machines"); the node's Envd then checks the token
// or signature itself.
#include <boost/beast/http/message.hpp>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "e2b/access_token.h"

namespace vessel::e2b::envd {

// "49983-<id>.<domain>[:port]" -> id.
std::optional<std::string> sandboxFromHost(std::string_view host);

// nullopt: the request names no sandbox and carries no signature a live
// sandbox made (it is answered where it arrived). `live_ids` is asked only
// for a signed URL that names no sandbox.
std::optional<std::string> sandboxOfRequest(
    const boost::beast::http::request_header<>& head, const AccessTokens& tokens,
    const std::function<std::vector<std::string>()>& live_ids);

}  // namespace vessel::e2b::envd
