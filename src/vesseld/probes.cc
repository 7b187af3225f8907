#include "vesseld/probes.h"

#include <boost/json.hpp>

namespace vessel::vesseld {

namespace json = boost::json;
using http::Request;
using http::Response;

void installProbes(http::HttpServer& server, std::string role, ReadyCheck ready) {
  server.route(http::verb::get, "/livez",
               [role](const Request& req) -> boost::asio::awaitable<Response> {
                 json::object o{{"status", "ok"}, {"role", role}};
                 co_return http::jsonResponse(req, http::status::ok, json::serialize(o));
               });
  server.route(http::verb::get, "/readyz",
               [role, ready](const Request& req) -> boost::asio::awaitable<Response> {
                 json::object o{{"role", role}};
                 bool ok = ready(o);
                 o["status"] = ok ? "ready" : "not ready";
                 co_return http::jsonResponse(
                     req, ok ? http::status::ok : http::status::service_unavailable,
                     json::serialize(o));
               });
}

}  // namespace vessel::vesseld
