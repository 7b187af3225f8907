#pragma once
// The path of a static file below its URL prefix (http/static_files.h), as
// a request names it: the one check a browser's path meets before any
// lookup, and the Content-Type a file's name calls for. Parsers of
// untrusted bytes only (tests/fuzz/asset_path).
#include <string_view>

#include "base/result.h"

namespace vessel::http {

// Whether `rel` ("app.js", "vendor/xterm.css") may name a served file:
// segments of [A-Za-z0-9_-] then [A-Za-z0-9._-], at most `max_depth`; no
// empty, dot-led ("..", ".git"), or encoded segment. kNotFound otherwise.
Status checkAssetPath(std::string_view rel, size_t max_depth);

// The Content-Type a file's name calls for (octet-stream when unknown, so
// a browser that honours nosniff runs or styles nothing it was not meant to).
std::string_view contentTypeFor(std::string_view name);

}  // namespace vessel::http
