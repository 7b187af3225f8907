#pragma once
// Signed /files URLs (the SDKs' uploadUrl/downloadUrl): a URL that carries
// `signature` (and optionally `signature_expiration`) instead of the access
// token, so that a browser or curl can use it. The signature is
//   "v1_" + base64(SHA-256("<path>:<read|write>:<user>:<token>[:<expiration>]"))
// with the base64 padding removed, where token is the sandbox's envd access
// token; the SDK computes it and only the sandbox's token can make it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::e2b::envd {

struct SignedRequest {
  std::string path;       // the `path` query parameter as sent
  std::string operation;  // "read" (GET) or "write" (POST)
  std::string user;       // the `username` query parameter, "" if absent
  std::string signature;
  std::optional<int64_t> expiration;  // unix seconds
};

std::string fileSignature(std::string_view path, std::string_view operation, std::string_view user,
                          std::string_view token, std::optional<int64_t> expiration);

// Whether `r` was signed with `token` (constant-time compare) and has not
// expired at `now_unix`: kUnauthenticated otherwise, saying which.
Status checkFileSignature(const SignedRequest& r, std::string_view token, int64_t now_unix);

// Parses `signature_expiration` (decimal unix seconds).
Result<int64_t> parseExpiration(std::string_view s);

}  // namespace vessel::e2b::envd
