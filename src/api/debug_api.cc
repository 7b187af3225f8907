#include "api/debug_api.h"

#include <boost/json.hpp>

#include "api/auth.h"
#include "api/resources.h"

namespace vessel::api {

namespace json = boost::json;

namespace {

asio::awaitable<std::optional<Response>> debugExec(const Request& req, store::Store& store,
                                                   ControlPlane& control) {
  auto tenant = authenticate(req, store);
  if (!tenant.ok()) co_return errorResponse(req, tenant.error());
  std::string path(req.target());
  const std::string prefix = "/debug/sandboxes/";
  std::string rest = path.substr(prefix.size());
  auto slash = rest.find('/');
  if (req.method() != http::verb::post || slash == std::string::npos ||
      rest.substr(slash) != "/exec" || !validId(rest.substr(0, slash)))
    co_return errorResponse(req, Error(Code::kNotFound, "no such endpoint: " + path));
  std::string id = rest.substr(0, slash);
  boost::system::error_code ec;
  json::value v = json::parse(req.body(), ec);
  if (ec || !v.is_object() || !v.as_object().contains("cmd") || !v.at("cmd").is_string())
    co_return errorResponse(req, Error(Code::kInvalidArgument, "body: {\"cmd\": \"...\"}"));
  auto sb = control.liveSandbox(*tenant, id);
  if (!sb || !sb->agent())
    co_return errorResponse(
        req, Error(Code::kFailedPrecondition, "sandbox " + id + " is not running here"));
  node::ExecSpec e;
  e.shell = std::string(v.at("cmd").as_string());
  if (auto* u = v.as_object().if_contains("user"); u && u->is_string())
    e.user = std::string(u->as_string());
  e.timeout = std::chrono::seconds(60);
  auto agent = sb->agent();
  auto r = co_await agent->run(std::move(e), 1 << 20);
  if (!r.ok()) co_return errorResponse(req, r.error());
  json::object o{{"exit_code", r->exit.exited ? r->exit.code : 128 + r->exit.signal},
                 {"stdout", r->out},
                 {"stderr", r->err}};
  co_return jsonResponse(req, http::status::ok, json::serialize(o));
}

}  // namespace

void installDebugExec(HttpServer& server, store::Store& store, ControlPlane& control) {
  server.routePrefix("/debug/sandboxes/",
                     [&store, &control](const Request& req, boost::beast::tcp_stream&) {
                       return debugExec(req, store, control);
                     });
}

}  // namespace vessel::api
