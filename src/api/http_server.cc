#include "api/http_server.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/json.hpp>

#include "base/log.h"

namespace vessel::api {

namespace beast = boost::beast;
using tcp = asio::ip::tcp;

http::status statusForCode(Code c) {
  switch (c) {
    case Code::kInvalidArgument: return http::status::bad_request;
    case Code::kNotFound: return http::status::not_found;
    case Code::kAlreadyExists: return http::status::conflict;
    case Code::kFailedPrecondition: return http::status::conflict;
    case Code::kResourceExhausted: return http::status::too_many_requests;
    case Code::kDeadlineExceeded: return http::status::gateway_timeout;
    case Code::kUnavailable: return http::status::service_unavailable;
    case Code::kProtocol: return http::status::bad_gateway;
    case Code::kPermissionDenied: return http::status::forbidden;
    case Code::kUnauthenticated: return http::status::unauthorized;
    case Code::kInternal: return http::status::internal_server_error;
  }
  return http::status::internal_server_error;
}

Response jsonResponse(const Request& req, http::status status, std::string body) {
  Response res{status, req.version()};
  res.set(http::field::content_type, "application/json");
  res.set(http::field::server, "vessel");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response errorResponse(const Request& req, const Error& e) {
  return errorResponse(req, e, boost::json::object{});
}

Response errorResponse(const Request& req, const Error& e, const boost::json::object& details) {
  boost::json::object o{{"code", std::string(codeName(e.code()))}, {"message", e.message()}};
  if (!details.empty()) o["details"] = details;
  return jsonResponse(req, statusForCode(e.code()), boost::json::serialize(o));
}

void HttpServer::setMetrics(metrics::Registry& r) {
  requests_ = &r.counter("vessel_http_requests_total",
                         "HTTP requests answered, by method and status", {"method", "status"});
  errors_ = &r.counter("vessel_api_errors_total", "JSON error responses, by error code", {"code"});
  latency_ = &r.histogram("vessel_http_request_duration_seconds",
                          "Time from a request read to its response written (SSE: to its end)",
                          {"method"});
}

Status HttpServer::listen(const HostPort& addr) {
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(addr.host, ec);
  if (ec) return Error(Code::kInvalidArgument, "listen: bad address " + addr.host);
  tcp::endpoint ep(ip, addr.port);
  acceptor_ = std::make_unique<tcp::acceptor>(io_);
  acceptor_->open(ep.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(ep, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Error(ec == asio::error::address_in_use ? Code::kAlreadyExists : Code::kUnavailable,
                 "listen on " + addr.host + ":" + std::to_string(addr.port) + ": " + ec.message());
  port_ = acceptor_->local_endpoint().port();
  asio::co_spawn(io_, acceptLoop(), asio::detached);
  return okStatus();
}

void HttpServer::close() {
  boost::system::error_code ec;
  if (acceptor_) acceptor_->close(ec);
}

asio::awaitable<void> HttpServer::acceptLoop() {
  for (;;) {
    auto [ec, sock] = co_await acceptor_->async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted || !acceptor_->is_open()) co_return;
    if (ec) continue;  // e.g. EMFILE: keep serving the connections we have
    asio::co_spawn(io_, serve(std::move(sock)), asio::detached);
  }
}

asio::awaitable<void> HttpServer::serve(tcp::socket sock) {
  beast::tcp_stream stream(std::move(sock));
  beast::flat_buffer buf;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<uint32_t>(limits_.max_header_bytes));
    parser.body_limit(limits_.max_body_bytes);
    stream.expires_after(limits_.idle_timeout);
    auto [ec, n] =
        co_await http::async_read(stream, buf, parser, asio::as_tuple(asio::use_awaitable));
    if (ec == http::error::end_of_stream || ec == beast::error::timeout) break;
    if (ec) {
      // A malformed or oversized request gets an answer, then the connection closes.
      Request dummy;
      dummy.version(11);
      Code code = (ec == http::error::body_limit || ec == http::error::header_limit)
                      ? Code::kResourceExhausted
                      : Code::kInvalidArgument;
      Response res = errorResponse(dummy, Error(code, "bad request: " + ec.message()));
      if (ec == http::error::body_limit || ec == http::error::header_limit)
        res.result(ec == http::error::body_limit ? http::status::payload_too_large
                                                 : http::status::request_header_fields_too_large);
      res.keep_alive(false);
      count("-", res, std::chrono::steady_clock::now());
      co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
      break;
    }
    Request req = parser.release();
    auto started = std::chrono::steady_clock::now();
    std::optional<Response> out = co_await dispatch(req, stream);
    std::string method(req.method_string());
    if (!out) {
      // The handler wrote (and ended) the response itself: an event stream.
      Response sse{http::status::ok, req.version()};
      count(method, sse, started);
      break;
    }
    Response& res = *out;
    count(method, res, started);
    auto [wec, wn] = co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    if (wec || !res.keep_alive()) break;
  }
  boost::system::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
}

void HttpServer::count(const std::string& method, const Response& res,
                       std::chrono::steady_clock::time_point started) {
  if (!requests_) return;
  // Methods are a closed set for the label; anything odd is "other".
  static const char* kKnown[] = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "-"};
  std::string m = "other";
  for (const char* k : kKnown)
    if (method == k) m = k;
  requests_->with({m, std::to_string(res.result_int())}).inc();
  latency_->with({m}).observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  if (res.result_int() >= 400 && res.body().size() < 64 * 1024) {
    boost::system::error_code ec;
    auto v = boost::json::parse(res.body(), ec);
    if (!ec && v.is_object())
      if (const auto* c = v.as_object().if_contains("code"); c && c->is_string())
        errors_->with({std::string(c->as_string())}).inc();
  }
}

asio::awaitable<std::optional<Response>> HttpServer::dispatch(const Request& req,
                                                              beast::tcp_stream& stream) {
  std::string path(req.target());
  if (auto q = path.find('?'); q != std::string::npos) path.resize(q);
  auto it = routes_.find({req.method(), path});
  if (it != routes_.end()) co_return co_await it->second(req);
  for (auto& [prefix, h] : prefix_routes_)
    if (path.compare(0, prefix.size(), prefix) == 0) co_return co_await h(req, stream);
  for (auto& [key, h] : routes_)
    if (key.second == path)
      co_return errorResponse(req, Error(Code::kInvalidArgument, "method not allowed"));
  co_return errorResponse(req, Error(Code::kNotFound, "no such endpoint: " + path));
}

}  // namespace vessel::api
