#pragma once
// The API's front ends are written against the one HTTP library (src/http):
// its names (Request, HttpServer, errorResponse, parseQuery, ...) read
// unqualified in vessel::api, as they did when the library lived here.
namespace vessel::http {}

namespace vessel::api {
using namespace vessel::http;  // NOLINT(google-build-using-namespace): see above
}  // namespace vessel::api
