#pragma once
// api/openapi.yaml as an executable contract: tests hand it every response
// they get from a real vesseld and it says whether the spec allows it.
//
// Only the part of OpenAPI 3.0 the spec uses is understood. A schema keyword
// that would constrain a response but is not implemented here fails load()
// instead of being skipped, so the spec cannot quietly outgrow its checker.
#include <boost/json/value.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

namespace vessel::testing {

class OpenApi {
 public:
  static Result<OpenApi> load(const std::string& path);
  // The same from the YAML text itself (the unit test's small specs).
  static Result<OpenApi> parse(std::string_view yaml);

  OpenApi(OpenApi&&) noexcept;
  OpenApi& operator=(OpenApi&&) noexcept;
  ~OpenApi();

  // Whether the spec allows answering `method target` with `status` and
  // `body`. `target` is a concrete request target ("/v1/sandboxes/sb-1:pause",
  // query allowed) or a path template. The status must be declared for the
  // operation (or `default`); the body is checked only when the response
  // declares application/json content. Errors: kNotFound when the spec has
  // no such path or method, kInvalidArgument when the response breaks the
  // contract; the message names the operation and the JSON path
  // ("GET /v1/sandboxes/{id} 200: $.state: \"weird\" not in enum ...").
  Status checkResponse(std::string_view method, std::string_view target, int status,
                       const boost::json::value& body) const;

  // The same for a response as it came off the wire: a JSON response must
  // say application/json and parse; an event stream must say
  // text/event-stream (its body, possibly cut short, is not read); a
  // response without content must have an empty body.
  Status checkRawResponse(std::string_view method, std::string_view target, int status,
                          std::string_view content_type, std::string_view body) const;

  // `body` against #/components/schemas/<name>.
  Status checkSchema(std::string_view name, const boost::json::value& body) const;

 private:
  struct Impl;
  explicit OpenApi(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vessel::testing
