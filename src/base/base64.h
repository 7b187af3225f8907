#pragma once
// Base64 (RFC 4648) through OpenSSL: what the data planes put in JSON, the
// envd protocol's bytes fields, and the forms the credential scrubber looks
// for.
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel {

// Standard alphabet, padded.
std::string base64Encode(std::string_view in);
// Either alphabet (+/ or -_), padding optional, at most `max_bytes` of
// input; kInvalidArgument otherwise.
Result<std::string> base64Decode(std::string_view in, size_t max_bytes);

}  // namespace vessel
