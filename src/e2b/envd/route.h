#pragma once
// Which sandbox an envd request is for, from its head alone, found the way
// Envd finds it: the `E2b-Sandbox-Id` header, else a `49983-<id>.<domain>`
// Host. A signed /files URL names its sandbox the same way: no request
// makes Vessel try the tokens of the live sandboxes. An API replica's envd
// listener uses it to forward each request to the node running its sandbox
// (docs/design.md, "Many machines"). Only the replica can check the token
// or signature (authenticated()); it vouches for what it forwards
// (AccessTokens::forwardProof).
#include <boost/beast/http/message.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "e2b/access_token.h"

namespace vessel::e2b::envd {

// "49983-<id>.<domain>[:port]" -> id.
std::optional<std::string> sandboxFromHost(std::string_view host);

// nullopt: the request names no sandbox (it is answered where it arrived).
std::optional<std::string> sandboxOfRequest(const boost::beast::http::request_header<>& head);

// Whether the request carries `sandbox_id`'s access token, or (a /files
// request) a valid, unexpired signature made with it. False without the key.
bool authenticated(const boost::beast::http::request_header<>& head, const AccessTokens& tokens,
                   const std::string& sandbox_id);

}  // namespace vessel::e2b::envd
