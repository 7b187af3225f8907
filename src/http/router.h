#pragma once
// The one request router of every front end (control plane, data plane,
// E2B REST, envd, the node API, template transfer). Each declares a route
// table: a method and a path pattern per handler. The router answers what
// no handler should have to: 404 for a path no route has, 405 with `Allow`
// for a method a path does not have (RFC 9110 15.5.6), 400 (or the error
// the parameter's type chooses) for a malformed path parameter. Handlers
// get their parameters checked and typed.
//
// Patterns are '/'-separated segments, each a literal ("sandboxes"), a
// parameter ("{id}", "{pid:uint}"), or a parameter with a literal suffix
// after ':' ("{id}:pause", the control plane's custom methods). A
// parameter is one non-empty segment; its type (declared with paramType,
// or the built-ins "segment" and "uint") checks it before any handler runs.
#include <boost/beast/core/tcp_stream.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "http/names.h"

namespace vessel::http {

using Request = request<string_body>;
using Response = response<string_body>;

class BodyReader;

// The parameters of a matched route, by name, checked by their types.
class Params {
 public:
  // The parameter's text (percent-decoding is the handler's: none of the
  // built-in types admit '%'). An unknown name is a broken route table.
  const std::string& operator[](std::string_view name) const;
  // A "uint" parameter's value.
  uint64_t number(std::string_view name) const;
  void set(std::string name, std::string value, std::optional<uint64_t> number);

 private:
  struct Value {
    std::string text;
    std::optional<uint64_t> number;
  };
  std::vector<std::pair<std::string, Value>> values_;
};

// A handler that answers with a response; the server writes it.
using RouteHandler = std::function<asio::awaitable<Response>(const Request&, const Params&)>;
// A handler that may write to the connection itself (SSE, streamed
// downloads); see HttpServer's StreamHandler for what it returns.
using StreamRouteHandler = std::function<asio::awaitable<std::optional<Response>>(
    const Request&, const Params&, boost::beast::tcp_stream&)>;
// A handler whose request body it streams; `req` holds the head only.
using UploadRouteHandler =
    std::function<asio::awaitable<Response>(const Request&, const Params&, BodyReader&)>;

// Checks a parameter's text: ok, or the error the request is refused with.
using ParamCheck = std::function<Status(std::string_view value)>;
// Renders the router's own refusals (404, 405, bad parameters) in the
// front end's error format (E2B's differs from the native API's).
using ErrorRenderer = std::function<Response(const Request&, const Error&)>;
// Runs before the router refuses a request under its prefix on its own: a
// response (401, say) is sent instead, so that an unauthenticated caller
// learns nothing of which paths exist, as before the router.
using Guard = std::function<std::optional<Response>(const Request&)>;

class Router {
 public:
  Router();
  void get(std::string pattern, RouteHandler h) {
    add(verb::get, std::move(pattern), std::move(h));
  }
  void post(std::string pattern, RouteHandler h) {
    add(verb::post, std::move(pattern), std::move(h));
  }
  void put(std::string pattern, RouteHandler h) {
    add(verb::put, std::move(pattern), std::move(h));
  }
  void del(std::string pattern, RouteHandler h) {
    add(verb::delete_, std::move(pattern), std::move(h));
  }
  void add(verb method, std::string pattern, RouteHandler h);
  void addStream(verb method, std::string pattern, StreamRouteHandler h);
  // Its body streamed, up to `max_body` bytes (the server's body limit does
  // not apply).
  void addUpload(verb method, std::string pattern, uint64_t max_body, UploadRouteHandler h);
  // A parameter type for patterns ("{id:sandbox}").
  void paramType(std::string name, ParamCheck check);
  // The renderer of refusals for paths under `prefix` (longest prefix wins;
  // the default renders errorResponse()).
  void errorsUnder(std::string prefix, ErrorRenderer render);
  void guardUnder(std::string prefix, Guard guard);

  struct Route {
    verb method;
    std::string pattern;
    RouteHandler plain;
    StreamRouteHandler stream;
    UploadRouteHandler upload;
    uint64_t max_body = 0;
  };
  // What a request's head leads to: a route and its parameters, or the
  // router's own answer.
  struct Match {
    const Route* route = nullptr;
    Params params;
    std::optional<Response> refusal;
  };
  // `path` is the target without its query.
  Match match(const request_header<>& head, std::string_view path) const;
  // The refusal `e` as the prefix's renderer writes it.
  Response render(const Request& req, std::string_view path, const Error& e) const;

 private:
  struct Segment {
    std::string literal;  // the whole segment, or a parameter's suffix
    std::string param;    // empty: a literal segment
    std::string type;
  };
  struct Compiled {
    std::vector<Segment> segments;
    Route route;
  };
  void insert(Route r);
  // `fits`: the path has the pattern's literal segments; then an Error is
  // a parameter its type refuses.
  Result<Params> fit(const std::vector<Segment>& pattern, const std::vector<std::string_view>& segs,
                     bool& fits) const;

  std::vector<Compiled> routes_;
  std::map<std::string, ParamCheck> types_;
  std::vector<std::pair<std::string, ErrorRenderer>> renderers_;
  std::vector<std::pair<std::string, Guard>> guards_;
};

}  // namespace vessel::http
