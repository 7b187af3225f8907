#include "http/server.h"

#include <sys/random.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/json.hpp>
#include <cstdio>
#include <random>

#include "base/log.h"
#include "http/headers.h"

namespace vessel::http {

namespace beast = boost::beast;
using tcp = asio::ip::tcp;

namespace {

// "req-" and 16 random hex digits: unique enough to grep one request
// across replicas, and cheap (a generator per thread, seeded once).
std::string requestId() {
  thread_local std::mt19937_64 rng([] {
    uint64_t seed = 0;
    if (::getrandom(&seed, sizeof seed, 0) != sizeof seed) seed = std::random_device{}();
    return seed;
  }());
  static const char* kHex = "0123456789abcdef";
  uint64_t v = rng();
  std::string id = "req-";
  for (int i = 15; i >= 0; --i) id.push_back(kHex[(v >> (i * 4)) & 15]);
  return id;
}

}  // namespace

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

std::optional<std::string_view> bearerToken(const Request& req) {
  auto it = req.find(http::field::authorization);
  if (it == req.end()) return std::nullopt;
  std::string_view v = it->value();
  constexpr std::string_view kBearer = "Bearer ";
  if (v.size() <= kBearer.size() || v.substr(0, kBearer.size()) != kBearer || v.size() > 512)
    return std::nullopt;
  return v.substr(kBearer.size());
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
  // The id the request is logged under, so a report of an error finds its line.
  if (auto it = req.find("X-Request-Id"); it != req.end()) o["request_id"] = it->value();
  return jsonResponse(req, statusForCode(e.code()), boost::json::serialize(o));
}

Response methodNotAllowed(const Request& req, std::string_view path, std::string_view allow) {
  Response res =
      errorResponse(req, Error(Code::kInvalidArgument,
                               std::string(req.method_string()) + " is not allowed on " +
                                   std::string(path) + " (allowed: " + std::string(allow) + ")"));
  res.result(http::status::method_not_allowed);
  res.set(http::field::allow, allow);
  return res;
}

void HttpServer::setMetrics(metrics::Registry& r, std::string plane) {
  // One family for both listeners (the registry hands the same one back),
  // told apart by `plane`.
  plane_ = std::move(plane);
  requests_ = &r.counter("vessel_http_requests_total",
                         "HTTP requests answered, by listener, method and status",
                         {"plane", "method", "status"});
  errors_ = &r.counter("vessel_api_errors_total",
                       "JSON error responses, by listener and error code", {"plane", "code"});
  latency_ =
      &r.histogram("vessel_http_request_duration_seconds",
                   "Time from a request read to its response written, by listener and method",
                   {"plane", "method"});
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

asio::ip::tcp::endpoint HttpServer::localEndpoint() const {
  boost::system::error_code ec;
  return acceptor_ ? acceptor_->local_endpoint(ec) : asio::ip::tcp::endpoint();
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
    asio::ip::address peer = peerOf(sock);
    if (open_ >= limits_.max_connections || per_peer_[peer] >= limits_.max_connections_per_peer) {
      if (per_peer_[peer] == 0) per_peer_.erase(peer);
      // Refused before a byte of it is read (and never waited on).
      static const std::string k503 =
          "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
          "Connection: close\r\nContent-Length: 67\r\n\r\n"
          "{\"code\":\"unavailable\",\"message\":\"too many connections, try again\"}\n";
      boost::system::error_code wec;
      sock.non_blocking(true, wec);
      sock.send(asio::buffer(k503), 0, wec);
      sock.shutdown(tcp::socket::shutdown_both, wec);
      continue;
    }
    // No Nagle: a response written in pieces (a head, then a stream's
    // events, a chunked body's last chunk) would otherwise wait for the
    // client's delayed ACK of the previous piece, up to 40 ms a piece.
    boost::system::error_code nd;
    sock.set_option(tcp::no_delay(true), nd);
    ++open_;
    ++per_peer_[peer];
    // Released when the connection's coroutine ends (a plain completion
    // handler: no coroutine wrapper, see CONTRIBUTING.md on g++ 12).
    asio::co_spawn(io_, serve(std::move(sock)), [this, peer](std::exception_ptr) {
      --open_;
      if (auto it = per_peer_.find(peer); it != per_peer_.end() && --it->second == 0)
        per_peer_.erase(it);
    });
  }
}

asio::ip::address HttpServer::peerOf(const tcp::socket& sock) const {
  boost::system::error_code ec;
  tcp::endpoint remote = sock.remote_endpoint(ec);
  if (peer_resolver_)
    if (auto p = peer_resolver_(remote)) return *p;
  return remote.address();
}

namespace {

Response readError(const boost::system::error_code& ec, const std::string& request_id) {
  // A malformed or oversized request gets an answer, then the connection
  // closes; its body names the id it is logged under, as every other error's.
  Request dummy;
  dummy.version(11);
  dummy.set("X-Request-Id", request_id);
  bool limit = ec == http::error::body_limit || ec == http::error::header_limit;
  Response res =
      errorResponse(dummy, Error(limit ? Code::kResourceExhausted : Code::kInvalidArgument,
                                 "bad request: " + ec.message()));
  if (limit)
    res.result(ec == http::error::body_limit ? http::status::payload_too_large
                                             : http::status::request_header_fields_too_large);
  res.keep_alive(false);
  return res;
}

std::string pathOf(std::string_view target) {
  std::string path(target);
  if (auto q = path.find('?'); q != std::string::npos) path.resize(q);
  return path;
}

}  // namespace

asio::awaitable<Result<std::optional<std::string>>> BodyReader::next() {
  if (parser_.is_done()) co_return std::optional<std::string>();
  if (!continued_) {
    continued_ = true;
    auto it = parser_.get().find(http::field::expect);
    if (it != parser_.get().end() && beast::iequals(it->value(), "100-continue")) {
      static const std::string k100 = "HTTP/1.1 100 Continue\r\n\r\n";
      auto [ec, n] = co_await asio::async_write(stream_, asio::buffer(k100),
                                                asio::as_tuple(asio::use_awaitable));
      if (ec) co_return Error(Code::kUnavailable, "upload: " + ec.message());
    }
  }
  constexpr size_t kChunk = 256 * 1024;
  chunk_.resize(kChunk);
  parser_.get().body().data = chunk_.data();
  parser_.get().body().size = chunk_.size();
  auto [ec, n] =
      co_await http::async_read(stream_, buf_, parser_, asio::as_tuple(asio::use_awaitable));
  if (ec == http::error::need_buffer) ec = {};
  if (ec) co_return Error(Code::kUnavailable, "upload: read body: " + ec.message());
  size_t got = chunk_.size() - parser_.get().body().size;
  received_ += got;
  if (received_ > limit_)
    co_return Error(Code::kResourceExhausted,
                    "upload: body larger than " + std::to_string(limit_) + " bytes");
  chunk_.resize(got);
  co_return std::optional<std::string>(std::move(chunk_));
}

// One connection's life, request after request. Over 80 lines because its
// steps (TLS hand-off, head, host claim, forward, upload, body, route,
// write) share the connection's state and are read best in their order.
asio::awaitable<void> HttpServer::serve(tcp::socket sock) {
  if (tls_handoff_ && tls_only_) {
    // Only the TLS relay's connections are plain (they are registered
    // with the resolver before they connect); anyone else speaks TLS.
    boost::system::error_code rec;
    tcp::endpoint remote = sock.remote_endpoint(rec);
    if (rec) co_return;
    if (!peer_resolver_ || !peer_resolver_(remote)) {
      tls_handoff_(std::move(sock));
      co_return;
    }
  } else if (tls_handoff_) {
    // Peek at the first byte, within the idle limit: a TLS ClientHello
    // record starts with 0x16, which no HTTP method does.
    asio::steady_timer idle(io_, limits_.idle_timeout);
    idle.async_wait([&sock](boost::system::error_code ec) {
      if (!ec) sock.cancel(ec);
    });
    auto [wec] =
        co_await sock.async_wait(tcp::socket::wait_read, asio::as_tuple(asio::use_awaitable));
    idle.cancel();
    if (wec) co_return;
    unsigned char first = 0;
    boost::system::error_code pec;
    size_t n = sock.receive(asio::buffer(&first, 1), tcp::socket::message_peek, pec);
    if (pec || n == 0) co_return;
    if (first == 0x16) {
      tls_handoff_(std::move(sock));
      co_return;
    }
  }
  beast::tcp_stream stream(std::move(sock));
  beast::flat_buffer buf;
  std::optional<UpstreamConnection> upstream;  // forwarded requests' (forwardWhen)
  for (;;) {
    Served served{requestId(), "-"};
    // The head first: an upload route streams its body, every other route
    // gets it whole, bounded.
    http::request_parser<http::empty_body> head;
    head.header_limit(static_cast<uint32_t>(limits_.max_header_bytes));
    head.body_limit(boost::none);  // checked below, per route
    stream.expires_after(limits_.idle_timeout);
    auto [ec, n] =
        co_await http::async_read_header(stream, buf, head, asio::as_tuple(asio::use_awaitable));
    if (ec == http::error::end_of_stream || ec == beast::error::timeout) break;
    if (ec) {
      Response res = readError(ec, served.id);
      count("-", res, std::chrono::steady_clock::now(), served);
      co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
      break;
    }
    // Where the request goes, read once: two Host fields are refused, an
    // absolute-form target names its own authority (http/headers.h).
    auto authority = requestAuthority(head.get());
    if (!authority.ok()) {
      Request dummy;
      dummy.version(11);
      Response res = errorResponse(dummy, authority.error());
      res.keep_alive(false);
      count("-", res, std::chrono::steady_clock::now(), served);
      co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
      break;
    }
    if (host_claims_ && host_claims_(*authority)) {
      // Another server's request (a sandbox's port): the connection is its.
      stream.expires_never();
      co_await host_handler_(stream, buf, head);
      co_return;
    }
    auto started = std::chrono::steady_clock::now();
    std::string method(head.get().method_string());
    if (std::optional<Upstream> to = forward_ ? forward_(head.get()) : std::nullopt) {
      if (!upstream) upstream.emplace(stream.get_executor());
      stream.expires_never();  // a forwarded stream lasts as long as the upstream's
      auto fw = co_await forwardRequest(stream, buf, head, *to, *upstream, forward_limits_);
      if (!fw.ok()) {
        Request dummy;
        dummy.version(11);
        Response res = errorResponse(dummy, fw.error());
        res.result(http::status::bad_gateway);
        res.keep_alive(false);  // its body is still unread
        count(method, res, started, served);
        stream.expires_after(limits_.idle_timeout);
        co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
        break;
      }
      served.route = "forward";
      Response seen{static_cast<http::status>(fw->status), 11};
      count(method, seen, started, served);
      if (!fw->keep_alive) break;
      continue;
    }
    // Ours from here on, whatever the client sent: handlers, the router's
    // refusals and every error body (errorResponse) name it.
    head.get().set("X-Request-Id", served.id);
    Router::Match match = router_.match(head.get(), pathOf(head.get().target()));
    if (match.route) served.route = match.route->pattern;
    const bool has_body = head.chunked() || (head.content_length() && *head.content_length() > 0);
    std::optional<Response> refused;
    if (head_check_ && has_body && match.route) refused = head_check_(head.get());
    if (refused) {
      refused->keep_alive(false);  // its body is still unread
      count(method, *refused, started, served);
      co_await http::async_write(stream, *refused, asio::as_tuple(asio::use_awaitable));
      break;
    }
    if (match.route && match.route->upload) {
      http::request_parser<http::buffer_body> parser(std::move(head));
      parser.body_limit(boost::none);  // BodyReader enforces the route's limit
      Request req;
      req.base() = parser.get().base();
      BodyReader body(stream, buf, parser, match.route->max_body);
      stream.expires_never();
      Response res = co_await match.route->upload(req, match.params, body);
      // A body the handler left unread cannot be skipped safely: close.
      if (!body.done()) res.keep_alive(false);
      count(method, res, started, served);
      stream.expires_after(limits_.idle_timeout);
      auto [wec, wn] = co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
      if (wec || !res.keep_alive()) break;
      continue;
    }
    // A declared length is judged now; a chunked body as it arrives.
    if (head.content_length() && *head.content_length() > limits_.max_body_bytes) {
      Response res = readError(http::error::body_limit, served.id);
      count("-", res, started, served);
      co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
      break;
    }
    if (match.refusal && has_body) {
      // No route takes it: refused without reading what it carries.
      Response no_route = *match.refusal;
      no_route.keep_alive(false);
      count(method, no_route, started, served);
      co_await http::async_write(stream, no_route, asio::as_tuple(asio::use_awaitable));
      break;
    }
    http::request_parser<http::string_body> parser(std::move(head));
    parser.body_limit(limits_.max_body_bytes);
    auto [bec, bn] =
        co_await http::async_read(stream, buf, parser, asio::as_tuple(asio::use_awaitable));
    if (bec == beast::error::timeout) break;
    if (bec) {
      Response res = readError(bec, served.id);
      count("-", res, started, served);
      co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
      break;
    }
    Request req = parser.release();  // with its X-Request-Id, which event streams echo
    std::optional<Response> out;
    if (match.refusal) {
      out = std::move(*match.refusal);
      out->keep_alive(req.keep_alive());
    } else if (match.route->plain) {
      out = co_await match.route->plain(req, match.params);
    } else {
      out = co_await match.route->stream(req, match.params, stream);
    }
    if (!out || isWrittenKeepAlive(*out)) {
      // The handler wrote (and ended) the response itself: an event stream.
      Response sse{http::status::ok, req.version()};
      count(method, sse, started, served);
      if (out && stream.socket().is_open()) continue;
      break;
    }
    Response& res = *out;
    count(method, res, started, served);
    auto [wec, wn] = co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    if (wec || !res.keep_alive()) break;
  }
  boost::system::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
}

void HttpServer::count(const std::string& method, Response& res,
                       std::chrono::steady_clock::time_point started, const Served& served) {
  // Every request once: its id (also the response's X-Request-Id), route,
  // status and duration. A line per request, so nothing more is built.
  res.set("X-Request-Id", served.id);
  auto took = std::chrono::steady_clock::now() - started;
  char ms[32];
  std::snprintf(ms, sizeof ms, "%.1f", std::chrono::duration<double, std::milli>(took).count());
  std::string status = std::to_string(res.result_int());
  Logger("http").infoWith("request", {{"plane", plane_.empty() ? "-" : plane_},
                                      {"request_id", served.id},
                                      {"method", method},
                                      {"route", served.route},
                                      {"status", status},
                                      {"duration_ms", ms}});
  if (!requests_) return;
  // Methods are a closed set for the label; anything odd is "other".
  static const char* kKnown[] = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "-"};
  std::string m = "other";
  for (const char* k : kKnown)
    if (method == k) m = k;
  requests_->with({plane_, m, std::to_string(res.result_int())}).inc();
  latency_->with({plane_, m}).observe(std::chrono::duration<double>(took).count());
  if (res.result_int() >= 400 && res.body().size() < 64 * 1024) {
    boost::system::error_code ec;
    auto v = boost::json::parse(res.body(), ec);
    if (!ec && v.is_object())
      if (const auto* c = v.as_object().if_contains("code"); c && c->is_string())
        errors_->with({plane_, std::string(c->as_string())}).inc();
  }
}

Response writtenKeepAlive() {
  Response res{http::status::unknown, 11};
  res.set("X-Vessel-Written", "keep-alive");
  return res;
}

bool isWrittenKeepAlive(const Response& res) {
  return res.result() == http::status::unknown && res.count("X-Vessel-Written") != 0;
}

void HttpServer::route(http::verb method, std::string path, Handler h) {
  router_.add(method, std::move(path),
              [h = std::move(h)](const Request& req, const Params&) { return h(req); });
}

}  // namespace vessel::http
