#pragma once
// SHA-256 (OpenSSL) of bytes or of a file, as lowercase hex. Used for cache
// keys and the checksums in template manifests.
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel {

std::string sha256Hex(std::string_view data);
// Streams the file; a 1 GiB file never sits in memory.
Result<std::string> sha256File(const std::string& path);

}  // namespace vessel
