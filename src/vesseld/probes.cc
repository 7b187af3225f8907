#include "vesseld/probes.h"

#include <boost/json.hpp>

namespace vessel::vesseld {

namespace json = boost::json;
namespace http = boost::beast::http;
using api::Request;
using api::Response;

void installProbes(api::HttpServer& server, std::string role, ReadyCheck ready) {
  server.route(http::verb::get, "/livez",
               [role](const Request& req) -> boost::asio::awaitable<Response> {
                 json::object o{{"status", "ok"}, {"role", role}};
                 co_return api::jsonResponse(req, http::status::ok, json::serialize(o));
               });
  server.route(http::verb::get, "/readyz",
               [role, ready](const Request& req) -> boost::asio::awaitable<Response> {
                 json::object o{{"role", role}};
                 bool ok = ready(o);
                 o["status"] = ok ? "ready" : "not ready";
                 co_return api::jsonResponse(
                     req, ok ? http::status::ok : http::status::service_unavailable,
                     json::serialize(o));
               });
}

}  // namespace vessel::vesseld
